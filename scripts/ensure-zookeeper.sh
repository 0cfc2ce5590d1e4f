#!/usr/bin/env bash
# ZooKeeper for the cluster tests and `shedlab sandbox` (Debian's package), installed where missing.
# Nothing is started here: shedlab.cluster.zookeeper_server starts a private server on loopback.
exec bash "$(dirname "$0")/ensure-debian-package.sh" zookeeper /usr/share/java/zookeeper.jar
