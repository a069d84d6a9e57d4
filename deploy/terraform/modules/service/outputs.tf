output "security_group_id" {
  description = "Security group of the tasks (no ingress; egress to the VPC only)."
  value       = aws_security_group.this.id
}

output "task_definition_arn" {
  description = "ARN of the task definition (revision included)."
  value       = aws_ecs_task_definition.this.arn
}

output "service_name" {
  description = "Name of the ECS service, or null when create_service is false."
  value       = var.create_service ? aws_ecs_service.this[0].name : null
}

output "subnet_ids" {
  description = "The subnets the tasks run in."
  value       = var.subnet_ids
}

output "log_group_name" {
  description = "CloudWatch log group of the containers."
  value       = aws_cloudwatch_log_group.this.name
}
