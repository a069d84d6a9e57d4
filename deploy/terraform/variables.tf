################################################################################
# Naming and placement
################################################################################

variable "name" {
  description = "Name prefix of every resource (ECS cluster, services, MSK cluster, log groups)."
  type        = string
  default     = "pricing-ha"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{1,30}$", var.name))
    error_message = "name must be 2-31 characters of lower-case letters, digits and dashes, starting with a letter."
  }
}

variable "tags" {
  description = "Tags added to every resource."
  type        = map(string)
  default     = {}
}

variable "availability_zones" {
  description = "The two AZs, in order [AZ a, AZ b], e.g. [\"eu-west-1a\", \"eu-west-1b\"]: publishing group P1 and relay_a run only in the first, P2 and relay_b only in the second. Named explicitly, never discovered, so that P1 and P2 can never move into one AZ."
  type        = list(string)

  validation {
    condition     = length(var.availability_zones) == 2 && length(distinct(var.availability_zones)) == 2
    error_message = "availability_zones must name exactly two distinct AZs."
  }
}

################################################################################
# Network: a new VPC, or an existing one with one private subnet per AZ
################################################################################

variable "vpc_id" {
  description = "An existing VPC to deploy into. Null: a new VPC is created (vpc_cidr) with one private subnet per AZ and the VPC endpoints Fargate needs."
  type        = string
  default     = null
}

variable "private_subnet_ids" {
  description = "With vpc_id: one private subnet per AZ, in the order of availability_zones (index 0 in AZ a, index 1 in AZ b). They need a route to ECR, CloudWatch Logs, X-Ray and STS (NAT or VPC endpoints)."
  type        = list(string)
  default     = []

  validation {
    condition     = length(var.private_subnet_ids) == 0 || (length(var.private_subnet_ids) == 2 && length(distinct(var.private_subnet_ids)) == 2)
    error_message = "private_subnet_ids must be empty or list exactly two distinct subnets, one per AZ."
  }
}

variable "vpc_cidr" {
  description = "CIDR block of the VPC created when vpc_id is null."
  type        = string
  default     = "10.40.0.0/16"

  validation {
    condition     = can(cidrhost(var.vpc_cidr, 0))
    error_message = "vpc_cidr must be a valid IPv4 CIDR block."
  }
}

################################################################################
# Kafka: a new MSK cluster (IAM auth, TLS in transit and at rest), or bring your own
################################################################################

variable "kafka_bootstrap_servers" {
  description = "Bring your own Kafka: its bootstrap servers (host:port,...). Null: an MSK cluster is created."
  type        = string
  default     = null
}

variable "existing_msk_cluster_arn" {
  description = "With kafka_bootstrap_servers: the ARN of that MSK cluster when it uses IAM auth (tasks then authenticate with auth = \"msk_iam\" and get kafka-cluster permissions on its topics and groups). Null: the cluster is not MSK IAM; configure authentication with kafka_client_settings and kafka_secrets."
  type        = string
  default     = null
}

variable "kafka_security_group_id" {
  description = "With kafka_bootstrap_servers: a security group of that cluster to which ingress from the services is added. Null: reaching the cluster is your network's business."
  type        = string
  default     = null
}

variable "kafka_port" {
  description = "With kafka_bootstrap_servers: the brokers' port, opened from the tasks in kafka_security_group_id."
  type        = number
  default     = 9098
}

variable "https_egress_prefix_list_ids" {
  description = "With vpc_id: managed prefix lists the tasks may reach on 443 besides the VPC CIDR, e.g. your S3 gateway endpoint's (ECR image layers)."
  type        = list(string)
  default     = []
}

variable "kafka_client_settings" {
  description = "Extra librdkafka settings for every client, e.g. { \"ssl.ca.location\" = \"/etc/ssl/certs/ca-certificates.crt\" }, passed as PRICING_HA__BROKER__LIBRDKAFKA__* environment variables (dots become underscores)."
  type        = map(string)
  default     = {}
}

variable "kafka_secrets" {
  description = "librdkafka settings read from Secrets Manager or SSM at task start, e.g. { \"sasl.password\" = \"arn:aws:secretsmanager:...\" }. The execution role may read exactly these ARNs."
  type        = map(string)
  default     = {}
}

variable "kafka_version" {
  description = "Kafka version of the MSK cluster."
  type        = string
  default     = "3.7.x"
}

variable "broker_instance_type" {
  description = "MSK broker instance type."
  type        = string
  default     = "kafka.m7g.large"
}

variable "broker_count" {
  description = "Number of MSK brokers; a multiple of the two AZs (MSK spreads them evenly), at least replication_factor (4: two per AZ)."
  type        = number
  default     = 4

  validation {
    condition     = var.broker_count >= 2 && var.broker_count % 2 == 0
    error_message = "broker_count must be a positive multiple of 2 (one share per AZ)."
  }
}

variable "broker_volume_size_gb" {
  description = "EBS volume size of each MSK broker, in GiB."
  type        = number
  default     = 100
}

################################################################################
# Topics (pricing-ha topics create, run once as an ECS task)
################################################################################

variable "partitions" {
  description = "M, the partition count of every topic (topics.partitions). Fixed while groups run: changing it means new topics."
  type        = number
  default     = 12

  validation {
    condition     = var.partitions >= 1 && floor(var.partitions) == var.partitions
    error_message = "partitions must be a positive integer."
  }
}

variable "replication_factor" {
  description = "Replicas per partition (topics.replication_factor). 4 = two per AZ (broker.rack is the AZ ID): the MSK cluster and `pricing-ha topics create` require min.insync.replicas = 2, so an acknowledged write is on two replicas and losing one AZ leaves two in sync. Needs broker_count >= 4."
  type        = number
  default     = 4

  validation {
    condition     = var.replication_factor >= 1 && var.replication_factor <= 4
    error_message = "replication_factor must be between 1 and 4."
  }
}

variable "topic_names" {
  description = "The six topic names ([topics] in config/default.toml). IAM policies name exactly these."
  type = object({
    quotes  = optional(string, "md.quotes")
    neli    = optional(string, "pricing.neli")
    raw     = optional(string, "prices.raw")
    prices  = optional(string, "prices")
    dlq     = optional(string, "md.quotes.dlq")
    raw_dlq = optional(string, "prices.raw.dlq")
  })
  default = {}
}

variable "run_topics_task" {
  description = "Run the one-shot `pricing-ha topics create` task with the AWS CLI (local-exec) on apply, before the services start. False: run it yourself (see the topics_create_command output)."
  type        = bool
  default     = true
}

################################################################################
# Compute
################################################################################

variable "image" {
  description = "The pricing-ha container image (built from the repository's Dockerfile), e.g. 123456789012.dkr.ecr.eu-west-1.amazonaws.com/pricing-ha:1.2.3. Prefer an immutable tag or a digest."
  type        = string
}

variable "otel_collector_image" {
  description = "The AWS Distro for OpenTelemetry collector image run as a sidecar in every task."
  type        = string
  default     = "public.ecr.aws/aws-observability/aws-otel-collector:v0.43.3"
}

variable "services" {
  description = "Per-service desired count, CPU units and memory (MiB). p1 runs only in AZ a, p2 only in AZ b; relay_a and relay_b are the relay members of AZ a and AZ b (one relay group); feed runs in either AZ."
  type = map(object({
    desired_count = number
    cpu           = optional(number, 512)
    memory        = optional(number, 1024)
  }))
  default = {
    p1      = { desired_count = 2 }
    p2      = { desired_count = 2 }
    relay_a = { desired_count = 1 }
    relay_b = { desired_count = 1 }
    feed    = { desired_count = 1 }
  }

  validation {
    condition     = length(setsubtract(["p1", "p2", "relay_a", "relay_b", "feed"], keys(var.services))) == 0 && length(keys(var.services)) == 5
    error_message = "services must have exactly the keys p1, p2, relay_a, relay_b and feed."
  }

  validation {
    condition     = alltrue([for k, s in var.services : s.desired_count >= 1 || k == "feed"])
    error_message = "p1, p2, relay_a and relay_b need desired_count >= 1: a group without members is not a group."
  }
}

variable "stop_timeout_seconds" {
  description = "Grace between SIGTERM and SIGKILL (ECS stopTimeout, at most 120 on Fargate). It must cover a hand-over: stop leading, flush producers, leave the group, i.e. more than the publishers' session timeout plus flush time."
  type        = number
  default     = 60

  validation {
    condition     = var.stop_timeout_seconds >= 15 && var.stop_timeout_seconds <= 120
    error_message = "stop_timeout_seconds must be between 15 and 120 (the Fargate maximum)."
  }
}

variable "timing" {
  description = "NELI timing (docs/architecture.md, timing). Both sessions default to 6 s, MSK's default group.min.session.timeout.ms, so no broker setting is lowered; a relay crash is taken over by the relay's detector (takeover_after_ms), not by its group. Publishers are non-exclusive (threshold > session); the relay exclusive (threshold + clock skew < session), fenced by the broker (transactions)."
  type = object({
    publisher_session_timeout_ms = optional(number, 6000)
    publisher_threshold_ms       = optional(number, 9000)
    publisher_pulse_interval_ms  = optional(number, 500)
    relay_session_timeout_ms     = optional(number, 6000)
    relay_threshold_ms           = optional(number, 600)
    relay_clock_skew_ms          = optional(number, 200)
    relay_pulse_interval_ms      = optional(number, 150)
  })
  default = {}

  validation {
    condition     = var.timing.publisher_threshold_ms > var.timing.publisher_session_timeout_ms
    error_message = "Publishers run non-exclusive NELI: publisher_threshold_ms must exceed publisher_session_timeout_ms."
  }

  validation {
    condition     = var.timing.relay_threshold_ms + var.timing.relay_clock_skew_ms < var.timing.relay_session_timeout_ms
    error_message = "The relay runs exclusive NELI: relay_threshold_ms + relay_clock_skew_ms must be below relay_session_timeout_ms."
  }
}

variable "environment" {
  description = "Extra environment for every pricing-ha container (PRICING_HA__SECTION__KEY overrides, e.g. PRICING_HA__FEED__INSTRUMENTS). Cannot replace the variables this module sets."
  type        = map(string)
  default     = {}
}

################################################################################
# Telemetry
################################################################################

variable "log_retention_days" {
  description = "Retention of every CloudWatch log group (application, collector, MSK broker logs, VPC flow logs)."
  type        = number
  default     = 365

  validation {
    condition     = contains([1, 3, 5, 7, 14, 30, 60, 90, 120, 150, 180, 365, 400, 545, 731, 1096, 1827, 2192, 2557, 2922, 3288, 3653], var.log_retention_days)
    error_message = "log_retention_days must be a value CloudWatch Logs accepts (1, 3, 5, 7, 14, 30, ..., 365, ..., 3653)."
  }
}

variable "price_sample_ratio" {
  description = "Share of price-path traces sampled (telemetry.price_sample_ratio); leadership and fail-over spans are always recorded."
  type        = number
  default     = 0.01

  validation {
    condition     = var.price_sample_ratio >= 0 && var.price_sample_ratio <= 1
    error_message = "price_sample_ratio must be between 0 and 1."
  }
}
