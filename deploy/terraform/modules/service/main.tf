# One pricing-ha role as an ECS Fargate service (or a task definition only, for one-shot
# commands): the pricing-ha container, an ADOT collector sidecar, a log group with retention
# and a security group without ingress.

data "aws_region" "current" {}

data "aws_subnet" "pinned" {
  count = var.availability_zone == null ? 0 : 1
  id    = var.subnet_ids[0]
}

data "aws_vpc" "this" {
  id = var.vpc_id
}

locals {
  container = "pricing-ha"
  collector = "otel-collector"

  collector_config = templatefile("${path.module}/otel-collector.yaml", {
    region            = data.aws_region.current.name
    metrics_log_group = var.metrics_log_group_name
    service           = var.name
  })

  log_configuration = {
    logDriver = "awslogs"
    options = {
      awslogs-group         = aws_cloudwatch_log_group.this.name
      awslogs-region        = data.aws_region.current.name
      awslogs-stream-prefix = var.name
    }
  }

  pricing_ha = {
    name      = local.container
    image     = var.image
    essential = true
    command   = var.command
    # ECS delivers SIGTERM to the exec-form ENTRYPOINT and waits this long before SIGKILL: the
    # member stops leading, flushes its producers and leaves its group in that time.
    stopTimeout            = var.stop_timeout_seconds
    readonlyRootFilesystem = true
    user                   = "10001:10001"
    environment            = [for k in sort(keys(var.environment)) : { name = k, value = var.environment[k] }]
    secrets                = [for k in sort(keys(var.secrets)) : { name = k, valueFrom = var.secrets[k] }]
    portMappings           = var.health_check ? [{ containerPort = 8080, protocol = "tcp", name = "health" }] : []
    mountPoints            = [{ sourceVolume = "state", containerPath = "/var/lib/pricing-ha", readOnly = false }]
    linuxParameters = {
      initProcessEnabled = true # an init as PID 1 forwards SIGTERM and reaps
      capabilities       = { drop = ["ALL"] }
    }
    healthCheck = var.health_check ? {
      # Liveness (/healthz); readiness needs the broker and must not restart every member when
      # the broker is away.
      command     = ["CMD", "/opt/pricing-ha/bin/python", "/opt/pricing-ha/healthcheck.py"]
      interval    = 10
      timeout     = 3
      retries     = 3
      startPeriod = 30
    } : null
    dependsOn        = [{ containerName = local.collector, condition = "START" }]
    logConfiguration = local.log_configuration
  }

  otel_collector = {
    name                   = local.collector
    image                  = var.otel_collector_image
    essential              = false # losing telemetry must not stop pricing
    readonlyRootFilesystem = true
    environment            = [{ name = "AOT_CONFIG_CONTENT", value = local.collector_config }]
    linuxParameters        = { capabilities = { drop = ["ALL"] } }
    healthCheck = {
      command     = ["CMD", "/healthcheck"]
      interval    = 10
      timeout     = 3
      retries     = 3
      startPeriod = 10
    }
    logConfiguration = local.log_configuration
  }
}

resource "aws_cloudwatch_log_group" "this" {
  name              = "/ecs/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.logs_kms_key_arn
  tags              = var.tags
}

resource "aws_ecs_task_definition" "this" {
  family                   = var.name
  requires_compatibilities = ["FARGATE"]
  network_mode             = "awsvpc"
  cpu                      = var.cpu
  memory                   = var.memory
  task_role_arn            = var.task_role_arn
  execution_role_arn       = var.execution_role_arn

  runtime_platform {
    operating_system_family = "LINUX"
    cpu_architecture        = "X86_64" # the lock is made for linux x86_64
  }

  volume {
    name = "state" # task storage: traces fallback and scratch, root stays read-only
  }

  container_definitions = jsonencode([
    { for k, v in local.pricing_ha : k => v if v != null },
    local.otel_collector,
  ])

  tags = var.tags
}

resource "aws_ecs_service" "this" {
  count = var.create_service ? 1 : 0

  name                   = var.name
  cluster                = var.cluster_arn
  task_definition        = aws_ecs_task_definition.this.arn
  desired_count          = var.desired_count
  launch_type            = "FARGATE"
  platform_version       = "LATEST"
  enable_execute_command = false
  propagate_tags         = "SERVICE"

  # Replace a task only after its successor runs: the group never shrinks during a deployment,
  # and the stopped member hands over (SIGTERM, stopTimeout) while the new one already leads.
  deployment_minimum_healthy_percent = 100
  deployment_maximum_percent         = 200

  deployment_circuit_breaker {
    enable   = true
    rollback = true
  }

  network_configuration {
    subnets          = var.subnet_ids
    security_groups  = [aws_security_group.this.id]
    assign_public_ip = false
  }

  tags = var.tags

  lifecycle {
    precondition {
      condition     = var.availability_zone == null || (length(var.subnet_ids) == 1 && try(data.aws_subnet.pinned[0].availability_zone, "") == var.availability_zone)
      error_message = "A service pinned to an AZ must have exactly one subnet, in that AZ."
    }
  }
}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-"
  description = "${var.name} tasks: no ingress, egress inside the VPC only"
  vpc_id      = var.vpc_id
  tags        = merge(var.tags, { Name = var.name })

  lifecycle {
    create_before_destroy = true
  }
}

# Kafka (9092-9098), HTTPS to the VPC endpoints: all inside the VPC.
resource "aws_vpc_security_group_egress_rule" "kafka" {
  security_group_id = aws_security_group.this.id
  description       = "Kafka brokers in the VPC"
  ip_protocol       = "tcp"
  from_port         = 9092
  to_port           = 9098
  cidr_ipv4         = data.aws_vpc.this.cidr_block
  tags              = var.tags
}

resource "aws_vpc_security_group_egress_rule" "https" {
  security_group_id = aws_security_group.this.id
  description       = "HTTPS to the VPC endpoints (ECR, Logs, X-Ray, STS)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  cidr_ipv4         = data.aws_vpc.this.cidr_block
  tags              = var.tags
}

# ECR serves image layers from S3, reached through the VPC's S3 gateway endpoint.
resource "aws_vpc_security_group_egress_rule" "https_prefix_lists" {
  for_each = toset(var.https_egress_prefix_list_ids)

  security_group_id = aws_security_group.this.id
  description       = "HTTPS to ${each.value} (S3 gateway endpoint: ECR image layers)"
  ip_protocol       = "tcp"
  from_port         = 443
  to_port           = 443
  prefix_list_id    = each.value
  tags              = var.tags
}
