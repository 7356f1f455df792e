#!/usr/bin/env bash
# pier end to end on one machine: installs what is missing, builds pier,
# starts the example backends (pier echo), runs `pier run -f examples/` with
# real HAProxy, waits until every example Ingress has an address in its
# status, checks each route once, and prints curl lines to try.
#
#   hack/demo.sh           run until Ctrl-C
#   hack/demo.sh --check   check the routes and exit (used by CI)
#
# Ports can be changed with HTTP_PORT, HTTPS_PORT and API_ADDR.
set -euo pipefail
cd "$(dirname "$0")/.."

check_only=false
[ "${1:-}" = "--check" ] && check_only=true

HTTP_PORT=${HTTP_PORT:-8080}
HTTPS_PORT=${HTTPS_PORT:-8443}
API_ADDR=${API_ADDR:-127.0.0.1:8082}
STATE_DIR=${STATE_DIR:-.pier-state/demo}

hack/deps.sh
hack/build.sh

pids=()
cleanup() {
  trap - EXIT INT TERM
  [ ${#pids[@]} -gt 0 ] && kill "${pids[@]}" 2>/dev/null || true
  wait 2>/dev/null || true
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# The example EndpointSlices point at these loopback ports.
start_echo() {
  bin/pier echo --listen "127.0.0.1:$1" --namespace demo --service "$2" --pod "$3" --log-level warn &
  pids+=($!)
}
start_echo 9001 webservice-1 webserver-1-pod
start_echo 9002 webservice-dev webserver-dev-pod
start_echo 9003 webservice-qa webserver-qa-pod
start_echo 9004 webservice-2 webserver-2-pod

mkdir -p "$STATE_DIR"
bin/pier run -f examples/ --state-dir "$STATE_DIR" --http-port "$HTTP_PORT" --https-port "$HTTPS_PORT" \
  --api-addr "$API_ADDR" 2>"$STATE_DIR/pier.log" &
pier_pid=$!
pids+=("$pier_pid")
echo "pier run started; its log is $STATE_DIR/pier.log" >&2

# address NAME prints the first address in the Ingress status, once there.
address() {
  local body ip
  for _ in $(seq 1 100); do
    if ! kill -0 "$pier_pid" 2>/dev/null; then
      echo "demo: pier run exited before Ingress demo/$1 got an address; the end of $STATE_DIR/pier.log:" >&2
      tail -n 20 "$STATE_DIR/pier.log" >&2
      return 1
    fi
    body=$(curl -fsS "http://$API_ADDR/ingresses/demo/$1" 2>/dev/null || true)
    ip=$(printf '%s' "$body" | grep -o '"ip": *"[^"]*"' | sed -n 1p | sed 's/.*"\([^"]*\)"$/\1/')
    if [ -n "$ip" ]; then echo "$ip"; return 0; fi
    sleep 0.2
  done
  echo "demo: Ingress demo/$1 got no address; see $STATE_DIR/pier.log" >&2
  tail -n 20 "$STATE_DIR/pier.log" >&2
  return 1
}
single=$(address single-service)
fanout=$(address simple-fanout)
vhost=$(address virtual-hosting)

failures=0
# expect HOST URL WANT: WANT is a service name or an HTTP status code.
expect() {
  local host=$1 url=$2 want=$3 out code got
  out=$(curl -s -o - -w '\n%{http_code}' -H "Host: $host" "$url")
  code=${out##*$'\n'}
  got=$(printf '%s' "$out" | grep -o '"service": *"[^"]*"' | sed -n 1p | sed 's/.*"\([^"]*\)"$/\1/' || true)
  [ "$code" = 200 ] || got=$code
  if [ "$got" = "$want" ]; then
    printf '  ok    %-28s %-42s -> %s\n' "Host: $host" "$url" "$got"
  else
    printf '  FAIL  %-28s %-42s -> %s (want %s)\n' "Host: $host" "$url" "$got" "$want"
    failures=$((failures + 1))
  fi
}
echo
echo "Routes checked through HAProxy:"
expect anything.example "http://$single:$HTTP_PORT/any/path" webservice-1
expect anything.example "http://$fanout:$HTTP_PORT/dev" webservice-dev
expect anything.example "http://$fanout:$HTTP_PORT/qa/report" webservice-qa
expect anything.example "http://$fanout:$HTTP_PORT/prod" 404
expect www.juniper.example "http://$vhost:$HTTP_PORT/" webservice-1
expect www.cisco.example "http://$vhost:$HTTP_PORT/" webservice-2
expect www.other.example "http://$vhost:$HTTP_PORT/" webservice-1

if $check_only; then
  bin/pier get loadbalancers --api-addr "$API_ADDR"
  [ "$failures" = 0 ] && echo "demo: all routes answered as expected" && exit 0
  echo "demo: $failures route(s) failed; see $STATE_DIR/pier.log" >&2
  exit 1
fi

cat <<TXT

pier is serving the three examples of examples/. Try:

  curl http://$single:$HTTP_PORT/any/path                          # single service: webservice-1
  curl http://$fanout:$HTTP_PORT/dev                               # fanout: webservice-dev
  curl http://$fanout:$HTTP_PORT/qa                                # fanout: webservice-qa
  curl -i http://$fanout:$HTTP_PORT/prod                           # no rule matches: 404
  curl -H 'Host: www.juniper.example' http://$vhost:$HTTP_PORT/    # virtual host: webservice-1
  curl -H 'Host: www.cisco.example' http://$vhost:$HTTP_PORT/      # virtual host: webservice-2
  curl -H 'Host: elsewhere.example' http://$vhost:$HTTP_PORT/      # default backend: webservice-1

  bin/pier get loadbalancers --api-addr $API_ADDR                  # the load-balancer objects
  curl http://$API_ADDR/ingresses/demo/simple-fanout               # an Ingress with its status
  ls $STATE_DIR/haproxy/                                           # a folder per load balancer, one per HAProxy process (shard)

Edit a file under examples/ and the change is live within a second.
Press Ctrl-C to stop pier, HAProxy and the backends.
TXT
# Only pier run is waited for: if it dies, the demo ends (and stops the
# backends) instead of waiting for them forever.
status=0
wait "$pier_pid" || status=$?
echo "demo: pier run exited (status $status); the end of $STATE_DIR/pier.log:" >&2
tail -n 20 "$STATE_DIR/pier.log" >&2
exit 1
