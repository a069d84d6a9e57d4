output "cluster_arn" {
  description = "ARN of the MSK cluster (IAM policies derive topic and group ARNs from it)."
  value       = aws_msk_cluster.this.arn
}

output "cluster_name" {
  description = "Name of the MSK cluster."
  value       = aws_msk_cluster.this.cluster_name
}

output "bootstrap_brokers_sasl_iam" {
  description = "Bootstrap servers of the IAM listener (SASL/OAUTHBEARER over TLS, port 9098)."
  value       = aws_msk_cluster.this.bootstrap_brokers_sasl_iam
}

output "security_group_id" {
  description = "Security group of the brokers; ingress is added per client security group."
  value       = aws_security_group.this.id
}

output "kms_key_arn" {
  description = "KMS key encrypting the brokers' volumes."
  value       = aws_kms_key.this.arn
}
