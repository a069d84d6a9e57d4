################################################################################
# IAM: one task role per service (and the topics task), least privilege
################################################################################
#
# MSK IAM access control works on ARNs derived from the cluster's:
#   cluster arn:...:cluster/<name>/<uuid>   topic arn:...:topic/<name>/<uuid>/<topic>
#   group   arn:...:group/<name>/<uuid>/<group>
#   transactional id  arn:...:transactional-id/<name>/<uuid>/<id>
# Each role may connect, describe the six topics (every command checks the layout first), read
# and write exactly the topics its role reads and writes, and use exactly its consumer groups and
# transactional ids: the rights of its role in pricing_ha/security/roles.py, which
# tests/unit/security/test_security_terraform.py compares with the policy below (docs/threat-model.md).
# Nothing is granted on "*" for Kafka; a name ending in "*" is a prefix.

locals {
  topic_arn_prefix            = local.msk_iam ? "${replace(local.cluster_arn, ":cluster/", ":topic/")}/" : ""
  group_arn_prefix            = local.msk_iam ? "${replace(local.cluster_arn, ":cluster/", ":group/")}/" : ""
  transactional_id_arn_prefix = local.msk_iam ? "${replace(local.cluster_arn, ":cluster/", ":transactional-id/")}/" : ""

  # The one-shot topics task: creates the six topics, reads and writes none of them.
  topics_task = {
    azs               = [0, 1]
    command           = ["topics", "create"]
    health            = false
    read              = []
    write             = []
    groups            = []
    transactional_ids = []
    create_topics     = true
  }

  task_roles = merge(local.services, { topics = local.topics_task })
}

data "aws_iam_policy_document" "tasks_assume" {
  statement {
    actions = ["sts:AssumeRole"]
    principals {
      type        = "Service"
      identifiers = ["ecs-tasks.amazonaws.com"]
    }
    condition {
      test     = "ArnLike"
      variable = "aws:SourceArn"
      values   = ["arn:${local.partition}:ecs:${local.region}:${local.account_id}:*"]
    }
    condition {
      test     = "StringEquals"
      variable = "aws:SourceAccount"
      values   = [local.account_id]
    }
  }
}

resource "aws_iam_role" "task" {
  for_each = local.task_roles

  name_prefix        = "${var.name}-${replace(each.key, "_", "-")}-"
  description        = "pricing-ha ${each.key} tasks: its Kafka topics and groups, telemetry"
  assume_role_policy = data.aws_iam_policy_document.tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "task_kafka" {
  for_each = local.msk_iam ? local.task_roles : {}

  statement {
    sid       = "Connect"
    actions   = ["kafka-cluster:Connect", "kafka-cluster:DescribeCluster"]
    resources = [local.cluster_arn]
  }

  statement {
    sid       = "DescribeLayout"
    actions   = ["kafka-cluster:DescribeTopic", "kafka-cluster:DescribeTopicDynamicConfiguration"]
    resources = [for t in values(local.topics) : "${local.topic_arn_prefix}${t}"]
  }

  dynamic "statement" {
    for_each = each.value.create_topics ? [1] : []
    content {
      sid       = "CreateTopics"
      actions   = ["kafka-cluster:CreateTopic", "kafka-cluster:AlterTopic", "kafka-cluster:AlterTopicDynamicConfiguration"]
      resources = [for t in values(local.topics) : "${local.topic_arn_prefix}${t}"]
    }
  }

  dynamic "statement" {
    for_each = length(each.value.read) > 0 ? [1] : []
    content {
      sid       = "Read"
      actions   = ["kafka-cluster:ReadData"]
      resources = [for r in each.value.read : "${local.topic_arn_prefix}${local.topics[r]}"]
    }
  }

  dynamic "statement" {
    for_each = length(each.value.write) > 0 ? [1] : []
    content {
      sid       = "Write"
      actions   = ["kafka-cluster:WriteData"]
      resources = [for w in each.value.write : "${local.topic_arn_prefix}${local.topics[w]}"]
    }
  }

  dynamic "statement" {
    # Idempotent producers (every producer of pricing-ha) need this on the cluster.
    for_each = length(each.value.write) > 0 ? [1] : []
    content {
      sid       = "WriteIdempotently"
      actions   = ["kafka-cluster:WriteDataIdempotently"]
      resources = [local.cluster_arn]
    }
  }

  dynamic "statement" {
    for_each = length(each.value.groups) > 0 ? [1] : []
    content {
      sid       = "Groups"
      actions   = ["kafka-cluster:AlterGroup", "kafka-cluster:DescribeGroup"]
      resources = [for g in each.value.groups : "${local.group_arn_prefix}${g}"]
    }
  }

  dynamic "statement" {
    # The relay's fencing: init_transactions on its own transactional ids, then writes in them.
    for_each = length(each.value.transactional_ids) > 0 ? [1] : []
    content {
      sid       = "Transactions"
      actions   = ["kafka-cluster:AlterTransactionalId", "kafka-cluster:DescribeTransactionalId"]
      resources = [for t in each.value.transactional_ids : "${local.transactional_id_arn_prefix}${t}"]
    }
  }
}

resource "aws_iam_role_policy" "task_kafka" {
  for_each = local.msk_iam ? local.task_roles : {}

  name   = "kafka"
  role   = aws_iam_role.task[each.key].id
  policy = data.aws_iam_policy_document.task_kafka[each.key].json
}

# The ADOT collector sidecar: traces to X-Ray, metrics as EMF events to one log group.
data "aws_iam_policy_document" "task_telemetry" {
  statement {
    sid = "XRay"
    # X-Ray's write and sampling actions support no resource-level permissions.
    actions   = ["xray:PutTraceSegments", "xray:PutTelemetryRecords", "xray:GetSamplingRules", "xray:GetSamplingTargets"]
    resources = ["*"] # checkov:skip=CKV_AWS_355:X-Ray actions accept only "*" as resource
  }

  statement {
    sid       = "MetricsAsEmf"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents", "logs:DescribeLogStreams"]
    resources = ["${aws_cloudwatch_log_group.metrics.arn}:*"]
  }
}

resource "aws_iam_role_policy" "task_telemetry" {
  for_each = local.task_roles

  name   = "telemetry"
  role   = aws_iam_role.task[each.key].id
  policy = data.aws_iam_policy_document.task_telemetry.json
}

################################################################################
# Execution role: pull the image, write the tasks' logs, read the Kafka secrets
################################################################################

locals {
  # 123456789012.dkr.ecr.eu-west-1.amazonaws.com/pricing-ha:tag -> its repository ARN
  ecr_image = try(regex("^(\\d{12})\\.dkr\\.ecr\\.([a-z0-9-]+)\\.amazonaws\\.com/([^:@]+)", var.image), null)
  ecr_repository_arn = local.ecr_image == null ? null : (
    "arn:${local.partition}:ecr:${local.ecr_image[1]}:${local.ecr_image[0]}:repository/${local.ecr_image[2]}"
  )
  task_log_group_arns = concat(
    [for k, _ in local.services : "arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/ecs/${var.name}-${replace(k, "_", "-")}:*"],
    ["arn:${local.partition}:logs:${local.region}:${local.account_id}:log-group:/ecs/${var.name}-topics:*"],
  )
}

resource "aws_iam_role" "execution" {
  name_prefix        = "${var.name}-exec-"
  description        = "ECS pulls pricing-ha's image, writes its logs and reads its secrets"
  assume_role_policy = data.aws_iam_policy_document.tasks_assume.json
  tags               = local.tags
}

data "aws_iam_policy_document" "execution" {
  dynamic "statement" {
    for_each = local.ecr_repository_arn == null ? [] : [1]
    content {
      sid       = "EcrToken"
      actions   = ["ecr:GetAuthorizationToken"]
      resources = ["*"] # checkov:skip=CKV_AWS_356:GetAuthorizationToken has no resource-level permissions
    }
  }

  dynamic "statement" {
    for_each = local.ecr_repository_arn == null ? [] : [1]
    content {
      sid       = "PullImage"
      actions   = ["ecr:BatchCheckLayerAvailability", "ecr:GetDownloadUrlForLayer", "ecr:BatchGetImage"]
      resources = [local.ecr_repository_arn]
    }
  }

  statement {
    sid       = "WriteLogs"
    actions   = ["logs:CreateLogStream", "logs:PutLogEvents"]
    resources = local.task_log_group_arns
  }

  dynamic "statement" {
    for_each = length(var.kafka_secrets) > 0 ? [1] : []
    content {
      sid       = "ReadKafkaSecrets"
      actions   = ["secretsmanager:GetSecretValue", "ssm:GetParameters"]
      resources = distinct(values(var.kafka_secrets))
    }
  }
}

resource "aws_iam_role_policy" "execution" {
  name   = "pull-log-secrets"
  role   = aws_iam_role.execution.id
  policy = data.aws_iam_policy_document.execution.json
}
