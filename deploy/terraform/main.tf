# pricing-ha in two availability zones (README: "Deploying to two AZs").
#
# The continuous-availability argument needs P1 and P2 never to share a failure domain, so it is
# structural here: each publishing group is its own ECS service whose only subnet is in its own
# AZ (P1 -> AZ a, P2 -> AZ b). The relay has a member service in each AZ (one relay group), the
# feed is a service of its own, and the topics are created by a one-shot task before any of
# them starts.

data "aws_region" "current" {}
data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

# The AZs are named by the caller, never picked from aws_availability_zones: a list that shrinks
# when an AZ is impaired would move P1 or P2 to the other group's AZ on the next apply.
data "aws_availability_zone" "selected" {
  count = 2
  name  = var.availability_zones[count.index]
}

locals {
  region     = data.aws_region.current.name
  account_id = data.aws_caller_identity.current.account_id
  partition  = data.aws_partition.current.partition

  azs = var.availability_zones
  # The AZ IDs (e.g. euw1-az1) are the racks: MSK sets broker.rack to them, and a client whose
  # client.rack matches fetches from the replica in its own AZ (KIP-392).
  az_ids = data.aws_availability_zone.selected[*].zone_id

  create_vpc  = var.vpc_id == null
  create_msk  = var.kafka_bootstrap_servers == null
  vpc_id      = local.create_vpc ? module.network[0].vpc_id : var.vpc_id
  subnet_ids  = local.create_vpc ? module.network[0].private_subnet_ids : var.private_subnet_ids
  msk_iam     = local.create_msk || var.existing_msk_cluster_arn != null
  cluster_arn = local.create_msk ? module.msk[0].cluster_arn : var.existing_msk_cluster_arn
  bootstrap   = local.create_msk ? module.msk[0].bootstrap_brokers_sasl_iam : var.kafka_bootstrap_servers

  topics = var.topic_names

  # Every service: which AZ indexes it may run in, its command, and what it reads and writes.
  # topic roles: "read" = consume, "write" = produce. The rights are those of the service's role
  # in pricing_ha/security/roles.py (the one table; tests/unit/security/test_security_terraform.py
  # compares them): consumer groups and transactional ids it uses, a trailing "*" a prefix.
  services = {
    p1 = {
      azs     = [0]
      command = ["run", "--group", "p1"]
      health  = true
      read    = ["quotes", "neli"]
      write   = ["neli", "raw", "dlq"]
      groups  = ["pricing.p1", "pricing.p1.quotes"]
      # Idempotent producers only.
      transactional_ids = []
      create_topics     = false
    }
    p2 = {
      azs     = [1]
      command = ["run", "--group", "p2"]
      health  = true
      read    = ["quotes", "neli"]
      write   = ["neli", "raw", "dlq"]
      groups  = ["pricing.p2", "pricing.p2.quotes"]
      # Idempotent producers only.
      transactional_ids = []
      create_topics     = false
    }
    relay_a = {
      azs     = [0]
      command = ["dedupe", "--group", "relay"]
      health  = true
      # The relay reads prices too: it rebuilds its high-water marks from prices on takeover.
      read  = ["raw", "neli", "prices"]
      write = ["neli", "prices", "raw_dlq"]
      # NELI, the committed prices.raw positions, and the standby's throwaway reader groups.
      groups = ["pricing.relay", "pricing.relay.raw", "relay-standby-*"]
      # One transactional producer per owned partition of prices (the relay's fencing): a
      # successor's init_transactions fences the previous owner.
      transactional_ids = ["pricing.relay.raw.${local.topics.prices}.*"]
      create_topics     = false
    }
    relay_b = {
      azs               = [1]
      command           = ["dedupe", "--group", "relay"]
      health            = true
      read              = ["raw", "neli", "prices"]
      write             = ["neli", "prices", "raw_dlq"]
      groups            = ["pricing.relay", "pricing.relay.raw", "relay-standby-*"]
      transactional_ids = ["pricing.relay.raw.${local.topics.prices}.*"]
      create_topics     = false
    }
    feed = {
      azs     = [0, 1]
      command = ["feed"]
      health  = false
      read    = []
      write   = ["quotes"]
      groups  = []
      # Idempotent producers only.
      transactional_ids = []
      create_topics     = false
    }
  }

  kafka_auth_environment = local.msk_iam ? {
    PRICING_HA__BROKER__AUTH       = "msk_iam"
    PRICING_HA__BROKER__AWS_REGION = local.region
  } : {}

  kafka_setting_environment = {
    for key, value in var.kafka_client_settings :
    "PRICING_HA__BROKER__LIBRDKAFKA__${upper(replace(key, ".", "_"))}" => value
  }

  # Everything but the AZ: the same for every container.
  common_environment = merge(
    var.environment,
    local.kafka_setting_environment,
    local.kafka_auth_environment,
    {
      PRICING_HA_BOOTSTRAP                      = local.bootstrap
      PRICING_HA__TOPICS__PARTITIONS            = tostring(var.partitions)
      PRICING_HA__TOPICS__REPLICATION_FACTOR    = tostring(var.replication_factor)
      PRICING_HA__TOPICS__QUOTES                = local.topics.quotes
      PRICING_HA__TOPICS__NELI                  = local.topics.neli
      PRICING_HA__TOPICS__RAW                   = local.topics.raw
      PRICING_HA__TOPICS__PRICES                = local.topics.prices
      PRICING_HA__TOPICS__DLQ                   = local.topics.dlq
      PRICING_HA__TOPICS__RAW_DLQ               = local.topics.raw_dlq
      PRICING_HA__NELI__SESSION_TIMEOUT_MS      = tostring(var.timing.publisher_session_timeout_ms)
      PRICING_HA__NELI__THRESHOLD_MS            = tostring(var.timing.publisher_threshold_ms)
      PRICING_HA__NELI__PULSE_INTERVAL_MS       = tostring(var.timing.publisher_pulse_interval_ms)
      PRICING_HA__RELAY__SESSION_TIMEOUT_MS     = tostring(var.timing.relay_session_timeout_ms)
      PRICING_HA__RELAY__THRESHOLD_MS           = tostring(var.timing.relay_threshold_ms)
      PRICING_HA__RELAY__CLOCK_SKEW_MS          = tostring(var.timing.relay_clock_skew_ms)
      PRICING_HA__RELAY__PULSE_INTERVAL_MS      = tostring(var.timing.relay_pulse_interval_ms)
      PRICING_HA__TELEMETRY__OTLP_ENDPOINT      = "http://127.0.0.1:4318"
      PRICING_HA__TELEMETRY__PRICE_SAMPLE_RATIO = tostring(var.price_sample_ratio)
    },
  )

  kafka_secrets = {
    for key, arn in var.kafka_secrets :
    "PRICING_HA__BROKER__LIBRDKAFKA__${upper(replace(key, ".", "_"))}" => arn
  }

  kafka_port = local.create_msk ? 9098 : var.kafka_port

  kafka_sg_id = local.create_msk ? module.msk[0].security_group_id : var.kafka_security_group_id

  https_prefix_lists = local.create_vpc ? [module.network[0].s3_prefix_list_id] : var.https_egress_prefix_list_ids

  metrics_log_group = "/ecs/${var.name}/metrics"

  tags = merge({ Application = "pricing-ha", ManagedBy = "terraform" }, var.tags)
}

################################################################################
# Network
################################################################################

module "network" {
  source = "./modules/network"
  count  = local.create_vpc ? 1 : 0

  name               = var.name
  cidr               = var.vpc_cidr
  azs                = local.azs
  log_retention_days = var.log_retention_days
  logs_kms_key_arn   = aws_kms_key.logs.arn
  tags               = local.tags
}

# The VPC endpoints accept HTTPS from the tasks only. The topics task's rule is its own resource:
# the services start after that task has run (no dependency cycle through the services' rules).
resource "aws_vpc_security_group_ingress_rule" "endpoints_from_services" {
  for_each = local.create_vpc ? local.services : {}

  security_group_id            = module.network[0].endpoint_security_group_id
  referenced_security_group_id = module.service[each.key].security_group_id
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  description                  = "HTTPS from ${each.key} tasks"
  tags                         = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "endpoints_from_topics_task" {
  count = local.create_vpc ? 1 : 0

  security_group_id            = module.network[0].endpoint_security_group_id
  referenced_security_group_id = module.topics_task.security_group_id
  ip_protocol                  = "tcp"
  from_port                    = 443
  to_port                      = 443
  description                  = "HTTPS from the topics task"
  tags                         = local.tags
}

data "aws_subnet" "selected" {
  count = 2
  id    = local.subnet_ids[count.index]
}

# A subnet in the wrong AZ would silently put both groups in one failure domain: refuse it.
resource "terraform_data" "subnets_match_azs" {
  input = [for s in data.aws_subnet.selected : s.availability_zone]

  lifecycle {
    precondition {
      condition     = data.aws_subnet.selected[0].availability_zone == local.azs[0] && data.aws_subnet.selected[1].availability_zone == local.azs[1]
      error_message = "private_subnet_ids[0] must be in availability_zones[0] and private_subnet_ids[1] in availability_zones[1]."
    }
  }
}

################################################################################
# Encryption keys: CloudWatch Logs (every log group) and MSK at rest
################################################################################

data "aws_iam_policy_document" "logs_key" {
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"] # in a key policy, "*" means this key
    # checkov:skip=CKV_AWS_109:a key policy's "*" is this key; the account root statement is the KMS default that lets IAM policies grant access
    # checkov:skip=CKV_AWS_111:a key policy's "*" is this key; the account root statement is the KMS default that lets IAM policies grant access
    # checkov:skip=CKV_AWS_356:a key policy's "*" is this key, not every resource
    principals {
      type        = "AWS"
      identifiers = ["arn:${local.partition}:iam::${local.account_id}:root"]
    }
  }

  statement {
    sid       = "CloudWatchLogsUsesForThisAccountsLogGroups"
    actions   = ["kms:Encrypt*", "kms:Decrypt*", "kms:ReEncrypt*", "kms:GenerateDataKey*", "kms:Describe*"]
    resources = ["*"] # in a key policy, "*" means this key
    principals {
      type        = "Service"
      identifiers = ["logs.${local.region}.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "kms:EncryptionContext:aws:logs:arn"
      values   = ["arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:*"]
    }
  }
}

resource "aws_kms_key" "logs" {
  description             = "${var.name}: CloudWatch Logs encryption"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.logs_key.json
  tags                    = local.tags
}

resource "aws_kms_alias" "logs" {
  name          = "alias/${var.name}-logs"
  target_key_id = aws_kms_key.logs.key_id
}

################################################################################
# Kafka
################################################################################

module "msk" {
  source = "./modules/msk"
  count  = local.create_msk ? 1 : 0

  name                  = var.name
  vpc_id                = local.vpc_id
  subnet_ids            = local.subnet_ids
  kafka_version         = var.kafka_version
  broker_instance_type  = var.broker_instance_type
  broker_count          = var.broker_count
  broker_volume_size_gb = var.broker_volume_size_gb
  replication_factor    = var.replication_factor
  log_retention_days    = var.log_retention_days
  logs_kms_key_arn      = aws_kms_key.logs.arn
  tags                  = local.tags
}

# Only the tasks reach the brokers: one rule per task security group, on the Kafka port only.
resource "aws_vpc_security_group_ingress_rule" "kafka_from_services" {
  for_each = local.create_msk || var.kafka_security_group_id != null ? local.services : {}

  security_group_id            = local.kafka_sg_id
  referenced_security_group_id = module.service[each.key].security_group_id
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  description                  = "Kafka from ${each.key} tasks"
  tags                         = local.tags
}

resource "aws_vpc_security_group_ingress_rule" "kafka_from_topics_task" {
  count = local.create_msk || var.kafka_security_group_id != null ? 1 : 0

  security_group_id            = local.kafka_sg_id
  referenced_security_group_id = module.topics_task.security_group_id
  ip_protocol                  = "tcp"
  from_port                    = local.kafka_port
  to_port                      = local.kafka_port
  description                  = "Kafka from the topics task"
  tags                         = local.tags
}

################################################################################
# ECS: the cluster, the one-shot topics task and one service per role and AZ
################################################################################

resource "aws_ecs_cluster" "this" {
  name = var.name

  setting {
    name  = "containerInsights"
    value = "enabled"
  }

  tags = local.tags
}

resource "aws_ecs_cluster_capacity_providers" "this" {
  cluster_name       = aws_ecs_cluster.this.name
  capacity_providers = ["FARGATE"]

  default_capacity_provider_strategy {
    capacity_provider = "FARGATE"
    weight            = 1
  }
}

module "service" {
  source   = "./modules/service"
  for_each = local.services

  name                 = "${var.name}-${replace(each.key, "_", "-")}"
  cluster_arn          = aws_ecs_cluster.this.arn
  vpc_id               = local.vpc_id
  subnet_ids           = [for i in each.value.azs : local.subnet_ids[i]]
  availability_zone    = length(each.value.azs) == 1 ? local.azs[each.value.azs[0]] : null
  image                = var.image
  otel_collector_image = var.otel_collector_image
  command              = each.value.command
  health_check         = each.value.health
  desired_count        = var.services[each.key].desired_count
  cpu                  = var.services[each.key].cpu
  memory               = var.services[each.key].memory
  stop_timeout_seconds = var.stop_timeout_seconds
  environment = merge(
    local.common_environment,
    length(each.value.azs) == 1 ? {
      PRICING_HA__TELEMETRY__AZ                   = local.azs[each.value.azs[0]]
      PRICING_HA__BROKER__LIBRDKAFKA__CLIENT_RACK = local.az_ids[each.value.azs[0]]
    } : {},
  )
  secrets                      = local.kafka_secrets
  task_role_arn                = aws_iam_role.task[each.key].arn
  execution_role_arn           = aws_iam_role.execution.arn
  log_retention_days           = var.log_retention_days
  logs_kms_key_arn             = aws_kms_key.logs.arn
  metrics_log_group_name       = aws_cloudwatch_log_group.metrics.name
  https_egress_prefix_list_ids = local.https_prefix_lists
  tags                         = merge(local.tags, { Role = each.key })

  depends_on = [terraform_data.topics, terraform_data.subnets_match_azs]
}

# Metrics from every collector sidecar, as CloudWatch Embedded Metric Format log events.
resource "aws_cloudwatch_log_group" "metrics" {
  name              = local.metrics_log_group
  retention_in_days = var.log_retention_days
  kms_key_id        = aws_kms_key.logs.arn
  tags              = local.tags
}
