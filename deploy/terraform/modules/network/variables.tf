variable "name" {
  description = "Name prefix of the VPC, subnets and endpoints."
  type        = string
}

variable "cidr" {
  description = "CIDR block of the VPC; each AZ gets a /20 private subnet from it."
  type        = string
}

variable "azs" {
  description = "The two AZs, [AZ a, AZ b]; private subnet i is created in azs[i]."
  type        = list(string)

  validation {
    condition     = length(var.azs) == 2
    error_message = "azs must list exactly two AZs."
  }
}

variable "log_retention_days" {
  description = "Retention of the VPC flow log group."
  type        = number
}

variable "logs_kms_key_arn" {
  description = "KMS key encrypting the flow log group."
  type        = string
}

variable "tags" {
  description = "Tags of every resource."
  type        = map(string)
  default     = {}
}
