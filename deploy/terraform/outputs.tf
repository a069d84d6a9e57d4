output "availability_zones" {
  description = "The two AZs: [AZ a (P1, relay_a), AZ b (P2, relay_b)]."
  value       = local.azs
}

output "subnet_ids_by_service" {
  description = "The only subnets each service may run in: p1's and p2's are single subnets in distinct AZs."
  value       = { for k, m in module.service : k => m.subnet_ids }
}

output "ecs_cluster_name" {
  description = "Name of the ECS cluster."
  value       = aws_ecs_cluster.this.name
}

output "service_names" {
  description = "ECS service name of each role: p1, p2, relay_a, relay_b, feed."
  value       = { for k, m in module.service : k => m.service_name }
}

output "log_groups" {
  description = "CloudWatch log group of each service and of the topics task."
  value       = merge({ for k, m in module.service : k => m.log_group_name }, { topics = module.topics_task.log_group_name })
}

output "kafka_bootstrap_servers" {
  description = "Bootstrap servers the tasks use (MSK's IAM listener when the cluster is created here)."
  value       = local.bootstrap
}

output "msk_cluster_arn" {
  description = "ARN of the MSK cluster (created or existing), or null for a non-MSK Kafka."
  value       = local.cluster_arn
}

output "task_role_arns" {
  description = "IAM task role of each service and of the topics task."
  value       = { for k, r in aws_iam_role.task : k => r.arn }
}

output "topics_create_command" {
  description = "The AWS CLI command that runs `pricing-ha topics create` once (what run_topics_task does on apply)."
  value       = local.topics_run_task
}

output "vpc_id" {
  description = "ID of the VPC the tasks run in."
  value       = local.vpc_id
}
