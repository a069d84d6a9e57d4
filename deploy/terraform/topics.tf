################################################################################
# Topics: `pricing-ha topics create` as a one-shot Fargate task, before any service starts
################################################################################
#
# Every topic must have the same partition count M (instrument slice k = partition k on every
# topic), so the topics are made by pricing-ha itself, with its own checks, not by a second
# description of the layout here. The command is idempotent: existing topics with M partitions
# are kept, a topic with another count fails the task (and the apply).

module "topics_task" {
  source = "./modules/service"

  name                         = "${var.name}-topics"
  create_service               = false
  cluster_arn                  = aws_ecs_cluster.this.arn
  vpc_id                       = local.vpc_id
  subnet_ids                   = local.subnet_ids
  image                        = var.image
  otel_collector_image         = var.otel_collector_image
  command                      = ["topics", "create"]
  health_check                 = false
  cpu                          = 256
  memory                       = 512
  stop_timeout_seconds         = 30
  environment                  = local.common_environment
  secrets                      = local.kafka_secrets
  task_role_arn                = aws_iam_role.task["topics"].arn
  execution_role_arn           = aws_iam_role.execution.arn
  log_retention_days           = var.log_retention_days
  logs_kms_key_arn             = aws_kms_key.logs.arn
  metrics_log_group_name       = aws_cloudwatch_log_group.metrics.name
  https_egress_prefix_list_ids = local.https_prefix_lists
  tags                         = merge(local.tags, { Role = "topics" })
}

locals {
  topics_run_task = join(" ", [
    "aws ecs run-task --region ${local.region} --cluster ${aws_ecs_cluster.this.name}",
    "--launch-type FARGATE --task-definition ${module.topics_task.task_definition_arn}",
    "--network-configuration 'awsvpcConfiguration={subnets=[${join(",", local.subnet_ids)}],securityGroups=[${module.topics_task.security_group_id}],assignPublicIp=DISABLED}'",
  ])
}

# Runs the task and fails the apply unless `pricing-ha topics create` exits 0. Needs the AWS CLI
# where Terraform runs; with run_topics_task = false, run the topics_create_command output.
resource "terraform_data" "topics" {
  count = var.run_topics_task ? 1 : 0

  triggers_replace = [module.topics_task.task_definition_arn]

  provisioner "local-exec" {
    interpreter = ["/bin/bash", "-c"]
    command     = <<-EOT
      set -euo pipefail
      task=$(${local.topics_run_task} --query 'tasks[0].taskArn' --output text)
      aws ecs wait tasks-stopped --region ${local.region} --cluster ${aws_ecs_cluster.this.name} --tasks "$task"
      code=$(aws ecs describe-tasks --region ${local.region} --cluster ${aws_ecs_cluster.this.name} --tasks "$task" \
        --query "tasks[0].containers[?name=='pricing-ha'].exitCode | [0]" --output text)
      if [ "$code" != "0" ]; then
        echo "pricing-ha topics create exited with $code: see log group ${module.topics_task.log_group_name}" >&2
        exit 1
      fi
    EOT
  }

  depends_on = [
    aws_vpc_security_group_ingress_rule.kafka_from_topics_task,
    aws_vpc_security_group_ingress_rule.endpoints_from_topics_task,
    aws_iam_role_policy.task_kafka,
    aws_iam_role_policy.execution,
  ]
}
