#!/usr/bin/env bash
# ZooKeeper for the cluster tests and `shedlab sandbox` (Debian's package), installed where missing.
# Nothing is started here: shedlab.cluster.zookeeper_server starts a private server on loopback.
set -euo pipefail
if [ -f /usr/share/java/zookeeper.jar ]; then exit 0; fi
if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null 2>&1 \
        || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zookeeper >/dev/null; }
else
    echo "ZooKeeper is not installed and installing it needs root: run 'sudo apt-get install zookeeper'" >&2
    exit 1
fi
