#!/bin/sh
# Creates what docker-compose.yml's members need in ${CRAWLNODE_SECRETS:-./secrets}
# (existing files are kept): a CA and certificates for n1..n5 made by `crawlnode tls`,
# a cluster key (32 random bytes, base64) and an API token (token.env).
#   docker/build.sh && docker/secrets.sh && docker-compose up -d
set -eu
dir=${CRAWLNODE_SECRETS:-./secrets}
image=${CRAWLNODE_IMAGE:-crawlnode:local}
mkdir -p "$dir"
dir=$(cd "$dir" && pwd)
run() { docker run --rm -v "$dir:/out" "$image" "$@"; }
[ -f "$dir/crawlnode-ca.pem" ] || run tls ca create --dir /out
for n in n1 n2 n3 n4 n5; do
	[ -f "$dir/$n-cert.pem" ] || run tls cert create --node "$n" --dir /out --ca /out/crawlnode-ca.pem --ca-key /out/crawlnode-ca-key.pem
done
umask 077
[ -f "$dir/cluster.key" ] || head -c 32 /dev/urandom | base64 > "$dir/cluster.key"
[ -f "$dir/token.env" ] || echo "CRAWLNODE_API_TOKEN=$(head -c 24 /dev/urandom | base64 | tr -d '/+=')" > "$dir/token.env"
echo "secrets in $dir"
