variable "name" {
  description = "Name of the service, its task family, log group and security group."
  type        = string
}

variable "cluster_arn" {
  description = "ARN of the ECS cluster."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the subnets."
  type        = string
}

variable "subnet_ids" {
  description = "The only subnets the tasks may run in: one subnet pins the service to that subnet's AZ."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) >= 1
    error_message = "subnet_ids must name at least one subnet."
  }
}

variable "availability_zone" {
  description = "The AZ the service is pinned to (tagged and checked against its subnet), or null when it may run in any of its subnets."
  type        = string
  default     = null
}

variable "create_service" {
  description = "Create an ECS service. False: only the task definition, for one-shot tasks (pricing-ha topics create)."
  type        = bool
  default     = true
}

variable "image" {
  description = "The pricing-ha container image."
  type        = string
}

variable "otel_collector_image" {
  description = "The AWS Distro for OpenTelemetry collector image (the sidecar)."
  type        = string
}

variable "command" {
  description = "Arguments after the image's ENTRYPOINT [\"pricing-ha\"], e.g. [\"run\", \"--group\", \"p1\"]."
  type        = list(string)
}

variable "health_check" {
  description = "Whether the command serves /healthz on port 8080 (run, dedupe), so ECS checks it."
  type        = bool
}

variable "desired_count" {
  description = "Number of tasks."
  type        = number
  default     = 1
}

variable "cpu" {
  description = "Task CPU units (256, 512, 1024, ...)."
  type        = number
  default     = 512
}

variable "memory" {
  description = "Task memory in MiB."
  type        = number
  default     = 1024
}

variable "stop_timeout_seconds" {
  description = "Grace between SIGTERM and SIGKILL for the pricing-ha container (Fargate allows up to 120)."
  type        = number
  default     = 60
}

variable "environment" {
  description = "Environment of the pricing-ha container."
  type        = map(string)
  default     = {}
}

variable "secrets" {
  description = "Environment variables read from Secrets Manager or SSM ARNs at task start."
  type        = map(string)
  default     = {}
}

variable "task_role_arn" {
  description = "IAM role the containers run as (Kafka and telemetry permissions)."
  type        = string
}

variable "execution_role_arn" {
  description = "IAM role ECS uses to pull the image, write logs and read secrets."
  type        = string
}

variable "log_retention_days" {
  description = "Retention of the service's log group."
  type        = number
}

variable "logs_kms_key_arn" {
  description = "KMS key encrypting the log group."
  type        = string
}

variable "metrics_log_group_name" {
  description = "CloudWatch log group the collector writes metrics to (Embedded Metric Format)."
  type        = string
}

variable "tags" {
  description = "Tags of every resource."
  type        = map(string)
  default     = {}
}

variable "https_egress_prefix_list_ids" {
  description = "Managed prefix lists the tasks may reach on 443 besides the VPC (the S3 gateway endpoint's, for ECR image layers)."
  type        = list(string)
  default     = []
}
