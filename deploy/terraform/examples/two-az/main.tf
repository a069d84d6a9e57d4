# pricing-ha in two AZs of one region, with a new VPC and a new MSK cluster (IAM auth, TLS):
#
#   terraform init
#   terraform apply -var image=123456789012.dkr.ecr.eu-west-1.amazonaws.com/pricing-ha:1.2.3
#
# P1 runs in eu-west-1a only, P2 in eu-west-1b only; a relay member in each; the feed in either.

provider "aws" {
  region = var.region

  default_tags {
    tags = { Environment = "example" }
  }
}

module "pricing_ha" {
  source = "../.."

  name               = "pricing-ha"
  image              = var.image
  availability_zones = ["${var.region}a", "${var.region}b"]

  partitions         = 12
  replication_factor = 4
  broker_count       = 4

  services = {
    p1      = { desired_count = 2 }
    p2      = { desired_count = 2 }
    relay_a = { desired_count = 1 }
    relay_b = { desired_count = 1 }
    feed    = { desired_count = 1, cpu = 256, memory = 512 }
  }

  environment = {
    PRICING_HA__FEED__INSTRUMENTS = "50"
  }
}
