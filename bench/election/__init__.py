"""NELI beside ZooKeeper's and etcd's leader elections."""
