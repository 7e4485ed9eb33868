package remote

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"
)

// BenchmarkVariable switches the double into its benchmark mode (bench/engine.py, bench/README.md):
// create, update and delete return at once with empty outputs, without opening an SSH session,
// so that `pulumi up` of a fleet measures the engine's cost per resource, not SSH or the scripts.
// The mode is off unless the variable is exactly BenchmarkOn; any other non-empty value is an
// error, so a typo never leaves a run guessing which mode it is in. The real pulumi-command
// knows no such variable.
const (
	BenchmarkVariable = "NUMA_KUBELETS_COMMAND_DOUBLE_BENCHMARK"
	BenchmarkOn       = "1"
)

// BenchmarkWarning is what every run in the mode says, once per provider process, as a warning
// under the stack's diagnostics.
const BenchmarkWarning = "BENCHMARK MODE (" + BenchmarkVariable + "=1): no command runs; create, update and " +
	"delete of every command:remote:Command succeed at once with empty stdout and stderr, and only for " +
	"loopback addresses where nothing listens. Never set this outside bench/engine.py."

// benchmark is read once, when the plugin starts: the engine starts it with its own environment.
var benchmark = os.Getenv(BenchmarkVariable)

// BenchmarkMode says whether the mode is on; an unrecognised value is an error.
func BenchmarkMode() (bool, error) {
	switch benchmark {
	case "":
		return false, nil
	case BenchmarkOn:
		return true, nil
	default:
		return false, fmt.Errorf("%s=%q: set it to %q for the benchmark mode or leave it unset", BenchmarkVariable,
			benchmark, BenchmarkOn)
	}
}

// pretend stands in for a run in the benchmark mode. It refuses any host but a loopback IP
// literal, and a port where something accepts a connection (one TCP connect on loopback, which
// the kernel refuses at once for the benchmark's closed ports): a real host, or the emulated
// test host on 127.0.0.1:2222, can never be answered without running the command.
func (s *CommandState) pretend(ctx context.Context) error {
	if s.Connection == nil {
		return fmt.Errorf("benchmark mode (%s): the command has no connection", BenchmarkVariable)
	}
	host := valueOr(s.Connection.Host, "")
	port := int(valueOr(s.Connection.Port, 22))
	if ip := net.ParseIP(host); ip == nil || !ip.IsLoopback() {
		return fmt.Errorf("benchmark mode (%s) answers only loopback IP addresses, not %q: unset it to run "+
			"the command", BenchmarkVariable, host)
	}
	address := net.JoinHostPort(host, strconv.Itoa(port))
	dialer := net.Dialer{Timeout: time.Second}
	if conn, err := dialer.DialContext(ctx, "tcp", address); err == nil {
		_ = conn.Close()
		return fmt.Errorf("benchmark mode (%s) refuses %s: something listens there, so it may be a host whose "+
			"command must really run; unset the variable to run it", BenchmarkVariable, address)
	}
	s.Stdout, s.Stderr = "", ""
	return nil
}
