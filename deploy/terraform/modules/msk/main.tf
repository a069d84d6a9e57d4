# An MSK cluster for pricing-ha: IAM authentication only (no unauthenticated or plaintext
# access), TLS between clients and brokers and between brokers, volumes encrypted with a
# customer-managed key, brokers spread evenly over the two AZs with broker.rack = AZ ID.

data "aws_caller_identity" "current" {}
data "aws_partition" "current" {}

resource "aws_security_group" "this" {
  name_prefix = "${var.name}-msk-"
  description = "${var.name} MSK brokers: IAM/TLS listener from the pricing-ha services only"
  vpc_id      = var.vpc_id
  tags        = merge(var.tags, { Name = "${var.name}-msk" })

  lifecycle {
    create_before_destroy = true
  }
}

data "aws_iam_policy_document" "key" {
  statement {
    sid       = "AccountAdministers"
    actions   = ["kms:*"]
    resources = ["*"] # in a key policy, "*" means this key
    # checkov:skip=CKV_AWS_109:a key policy's "*" is this key; the account root statement is the KMS default that lets IAM policies grant access
    # checkov:skip=CKV_AWS_111:a key policy's "*" is this key; the account root statement is the KMS default that lets IAM policies grant access
    # checkov:skip=CKV_AWS_356:a key policy's "*" is this key, not every resource
    principals {
      type        = "AWS"
      identifiers = ["arn:${data.aws_partition.current.partition}:iam::${data.aws_caller_identity.current.account_id}:root"]
    }
  }
}

resource "aws_kms_key" "this" {
  description             = "${var.name}: MSK encryption at rest"
  enable_key_rotation     = true
  deletion_window_in_days = 30
  policy                  = data.aws_iam_policy_document.key.json
  tags                    = var.tags
}

resource "aws_kms_alias" "this" {
  name          = "alias/${var.name}-msk"
  target_key_id = aws_kms_key.this.key_id
}

resource "aws_cloudwatch_log_group" "brokers" {
  name              = "/msk/${var.name}"
  retention_in_days = var.log_retention_days
  kms_key_id        = var.logs_kms_key_arn
  tags              = var.tags
}

resource "aws_msk_configuration" "this" {
  name           = "${var.name}-${replace(var.kafka_version, ".", "-")}"
  kafka_versions = [var.kafka_version]
  description    = "pricing-ha: topics only from pricing-ha topics create, rack-aware fetching"

  # auto.create.topics.enable=false: every topic must have the same partition count M, so only
  # `pricing-ha topics create` makes them. unclean.leader.election=false: never lose acknowledged
  # prices to a stale replica. RackAwareReplicaSelector: clients with client.rack = their AZ ID
  # read from the replica in their own AZ. MSK's default group.min.session.timeout.ms (6 s) is
  # kept: both publishing groups and the relay run at a 6 s session, and a relay crash is taken
  # over by the relay's own detector, not by the group. min.insync.replicas=2: an acknowledged write
  # (acks=all) is on two replicas; with two replicas in each AZ (RF 4) one AZ can be lost and
  # every topic, the transaction and offset logs included, stays writable.
  server_properties = <<-PROPERTIES
    auto.create.topics.enable=false
    default.replication.factor=${var.replication_factor}
    min.insync.replicas=2
    offsets.topic.replication.factor=${var.replication_factor}
    transaction.state.log.replication.factor=${var.replication_factor}
    transaction.state.log.min.isr=2
    unclean.leader.election.enable=false
    replica.selector.class=org.apache.kafka.common.replica.RackAwareReplicaSelector
  PROPERTIES

  lifecycle {
    create_before_destroy = true

    # min.insync.replicas = 2: fewer than three replicas would stop every acks=all producer
    # when one broker is lost (or never let one write), and a topic cannot have more replicas
    # than there are brokers.
    precondition {
      condition     = var.replication_factor >= 3 && var.replication_factor <= var.broker_count
      error_message = "With min.insync.replicas = 2, replication_factor must be at least 3 (4 to lose an AZ: two replicas per AZ) and at most broker_count."
    }
  }
}

resource "aws_msk_cluster" "this" {
  cluster_name           = var.name
  kafka_version          = var.kafka_version
  number_of_broker_nodes = var.broker_count
  enhanced_monitoring    = "PER_TOPIC_PER_PARTITION"

  broker_node_group_info {
    instance_type   = var.broker_instance_type
    client_subnets  = var.subnet_ids
    security_groups = [aws_security_group.this.id]

    storage_info {
      ebs_storage_info {
        volume_size = var.broker_volume_size_gb
      }
    }

    connectivity_info {
      public_access {
        type = "DISABLED"
      }
    }
  }

  client_authentication {
    unauthenticated = false
    sasl {
      iam   = true
      scram = false
    }
  }

  encryption_info {
    encryption_at_rest_kms_key_arn = aws_kms_key.this.arn
    encryption_in_transit {
      client_broker = "TLS"
      in_cluster    = true
    }
  }

  configuration_info {
    arn      = aws_msk_configuration.this.arn
    revision = aws_msk_configuration.this.latest_revision
  }

  open_monitoring {
    prometheus {
      jmx_exporter {
        enabled_in_broker = false
      }
      node_exporter {
        enabled_in_broker = false
      }
    }
  }

  logging_info {
    broker_logs {
      cloudwatch_logs {
        enabled   = true
        log_group = aws_cloudwatch_log_group.brokers.name
      }
    }
  }

  tags = var.tags
}
