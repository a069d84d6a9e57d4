output "availability_zones" {
  description = "AZ a (P1) and AZ b (P2)."
  value       = module.pricing_ha.availability_zones
}

output "service_names" {
  description = "ECS service of each role."
  value       = module.pricing_ha.service_names
}

output "ecs_cluster_name" {
  description = "Name of the ECS cluster."
  value       = module.pricing_ha.ecs_cluster_name
}

output "subnet_ids_by_service" {
  description = "The subnets each service may run in."
  value       = module.pricing_ha.subnet_ids_by_service
}
