#!/bin/sh
# Builds the crawlnode:local image FROM scratch: static binaries compiled here, copied in.
#   docker/build.sh            then: docker-compose up
set -eu
cd "$(dirname "$0")"
export PATH="/usr/local/go/bin:$PATH"
rm -rf context && mkdir -p context/tmp context/data context/shared
CGO_ENABLED=0 go build -trimpath -o context/crawlnode ../cmd/crawlnode
CGO_ENABLED=0 go build -trimpath -o context/simweb ../cmd/simweb
docker build -q -t "${CRAWLNODE_IMAGE:-crawlnode:local}" .
