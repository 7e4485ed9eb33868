# Run by qemu for each guest connection to the API address (qemu.py GUEST_API_ADDRESS): stdin
# and stdout are the connection. $1 names the file holding the 127.0.0.1 port to relay it to;
# no file yet (no control plane) closes the connection, as a refused one would.
set -eu
port=$(cat "$1" 2>/dev/null) || exit 1
case "$port" in
  ''|*[!0-9]*) exit 1 ;;
esac
exec socat - "TCP:127.0.0.1:$port"
