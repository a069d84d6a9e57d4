variable "name" {
  description = "Name of the MSK cluster and prefix of its security group, key and log group."
  type        = string
}

variable "vpc_id" {
  description = "VPC of the brokers."
  type        = string
}

variable "subnet_ids" {
  description = "One private subnet per AZ; MSK spreads the brokers evenly over them."
  type        = list(string)

  validation {
    condition     = length(var.subnet_ids) == 2
    error_message = "subnet_ids must list exactly two subnets, one per AZ."
  }
}

variable "kafka_version" {
  description = "Kafka version."
  type        = string
}

variable "broker_instance_type" {
  description = "Broker instance type."
  type        = string
}

variable "broker_count" {
  description = "Number of brokers; a multiple of the number of subnets."
  type        = number

  validation {
    condition     = var.broker_count >= 2 && var.broker_count % 2 == 0
    error_message = "broker_count must be a positive multiple of 2."
  }
}

variable "broker_volume_size_gb" {
  description = "EBS volume per broker, in GiB."
  type        = number
}

variable "replication_factor" {
  description = "default.replication.factor of the cluster (pricing-ha creates its topics with the same value)."
  type        = number
}

variable "log_retention_days" {
  description = "Retention of the broker log group."
  type        = number
}

variable "logs_kms_key_arn" {
  description = "KMS key encrypting the broker log group."
  type        = string
}

variable "tags" {
  description = "Tags of every resource."
  type        = map(string)
  default     = {}
}
