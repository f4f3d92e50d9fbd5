#!/usr/bin/env bash
# Makes sure a Redis answers at $REDIS_URL (default redis://127.0.0.1:6379).
# Starts a local redis-server when none answers, installing it from Debian's packages if needed.
set -euo pipefail

url="${REDIS_URL:-redis://127.0.0.1:6379}"
hostport="${url#*://}"
hostport="${hostport##*@}"
hostport="${hostport%%/*}"
host="${hostport%%:*}"
port="${hostport##*:}"
[ "$port" = "$host" ] && port=6379

ping() {
  # RESP PING over bash's /dev/tcp: no client needed.
  exec 3<>"/dev/tcp/$host/$port" 2>/dev/null || return 1
  printf 'PING\r\n' >&3
  local reply
  read -r -t 2 reply <&3 || { exec 3>&-; return 1; }
  exec 3>&-
  [[ "$reply" == +PONG* ]]
}

if ping; then
  echo "redis: answering at $host:$port"
  exit 0
fi

case "$host" in
  127.0.0.1|localhost|::1) ;;
  *) echo "redis: nothing answers at $host:$port and it is not local; start it there" >&2; exit 1 ;;
esac

if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis: installing redis-server"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq redis-server >/dev/null
fi

dir="$(mktemp -d /tmp/countbot-redis.XXXXXX)"
redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
  --dir "$dir" --logfile "$dir/redis.log"

for _ in $(seq 1 50); do
  if ping; then echo "redis: started at $host:$port"; exit 0; fi
  sleep 0.1
done
echo "redis: started redis-server but it does not answer at $host:$port (log: $dir/redis.log)" >&2
exit 1
