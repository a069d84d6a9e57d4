output "vpc_id" {
  description = "ID of the VPC."
  value       = aws_vpc.this.id
}

output "vpc_cidr_block" {
  description = "CIDR block of the VPC."
  value       = aws_vpc.this.cidr_block
}

output "private_subnet_ids" {
  description = "The private subnets, one per AZ, in the order of var.azs."
  value       = aws_subnet.private[*].id
}

output "endpoint_security_group_id" {
  description = "Security group of the interface endpoints; add ingress on 443 from each client."
  value       = aws_security_group.endpoints.id
}

output "s3_prefix_list_id" {
  description = "Prefix list of the S3 gateway endpoint (ECR image layers come from S3)."
  value       = aws_vpc_endpoint.s3.prefix_list_id
}
