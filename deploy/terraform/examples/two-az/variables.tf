variable "region" {
  description = "AWS region to deploy to."
  type        = string
  default     = "eu-west-1"
}

variable "image" {
  description = "The pricing-ha image built from the repository's Dockerfile and pushed to ECR (an immutable tag or a digest)."
  type        = string
}
