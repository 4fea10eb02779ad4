#!/bin/sh
# Host discovery for examples/elastic: prints the hosts that may run workers, one host:slots per
# line. horovodrun runs it every second; edit $HOSTS_FILE while the job runs to grow or shrink it.
file="${HOSTS_FILE:-}"
if [ -n "$file" ] && [ -f "$file" ]; then
    cat "$file"
else
    echo "localhost:2"
fi
