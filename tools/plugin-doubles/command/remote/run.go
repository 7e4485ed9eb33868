package remote

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	p "github.com/pulumi/pulumi-go-provider"
)

// The previous run's output, in the environment of the next one (addPreviousOutputInEnv).
const (
	previousStdoutVariable = "PULUMI_COMMAND_STDOUT"
	previousStderrVariable = "PULUMI_COMMAND_STDERR"
)

// run executes command in a new session on the connection's host. On success its stdout and
// stderr (each less one trailing newline) replace the state's; on failure the error carries
// the exit status, the command and everything it printed.
//
// In the benchmark mode (benchmark.go) nothing runs: see pretend.
func (s *CommandState) run(ctx context.Context, command string) error {
	if on, err := BenchmarkMode(); err != nil {
		return err
	} else if on {
		return s.pretend(ctx)
	}
	client, err := s.Connection.dial(ctx)
	if err != nil {
		return err
	}
	defer client.Close()
	session, err := client.NewSession()
	if err != nil {
		return err
	}
	defer session.Close()

	logger := p.GetLogger(ctx)
	// sshd sets only the variables its AcceptEnv allows and refuses the others.
	for name, value := range s.Environment {
		if err := session.Setenv(name, value); err != nil {
			logger.Error(acceptEnvHint(name))
			return fmt.Errorf("could not set environment variable %q: %w", name, err)
		}
	}
	if s.AddPreviousOutputInEnv == nil || *s.AddPreviousOutputInEnv {
		for name, value := range map[string]string{previousStdoutVariable: s.Stdout, previousStderrVariable: s.Stderr} {
			if value == "" {
				continue
			}
			if err := session.Setenv(name, value); err != nil {
				logger.Warning(acceptEnvHint(name)) // optional: the command runs without it
			}
		}
	}
	if s.Stdin != nil && *s.Stdin != "" {
		session.Stdin = strings.NewReader(*s.Stdin)
	}

	var stdout, stderr bytes.Buffer
	printed := &lockedBuffer{}
	log := &lineLogger{log: logger.InfoStatus}
	session.Stdout = io.MultiWriter(append([]io.Writer{&stdout, printed}, log.when(s.Logging.logs("stdout"))...)...)
	session.Stderr = io.MultiWriter(append([]io.Writer{&stderr, printed}, log.when(s.Logging.logs("stderr"))...)...)
	err = session.Run(command)
	log.flush()
	if err != nil {
		return fmt.Errorf("%w: running %q:\n%s", err, command, printed.String())
	}
	s.Stdout = strings.TrimSuffix(stdout.String(), "\n")
	s.Stderr = strings.TrimSuffix(stderr.String(), "\n")
	return nil
}

func acceptEnvHint(name string) string {
	return fmt.Sprintf("Unable to set '%s'. This only works if your SSH server is configured to accept "+
		"these variables via AcceptEnv. Alternatively, if a Bash-like shell runs the command on the remote "+
		"host, you could prefix the command itself with the variables in the form 'VAR=value command'", name)
}

// lockedBuffer takes stdout and stderr, which the SSH session copies from two goroutines.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(data []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(data)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// lineLogger sends each complete line of the streams it takes to log (the engine's status
// column), as the command prints it.
type lineLogger struct {
	mu      sync.Mutex
	partial []byte
	log     func(string)
}

// when is the logger as a writer to add to a stream when that stream is logged, else none.
func (l *lineLogger) when(logged bool) []io.Writer {
	if !logged {
		return nil
	}
	return []io.Writer{l}
}

func (l *lineLogger) Write(data []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.partial = append(l.partial, data...)
	for {
		end := bytes.IndexByte(l.partial, '\n')
		if end < 0 {
			return len(data), nil
		}
		l.log(string(l.partial[:end]))
		l.partial = l.partial[end+1:]
	}
}

// flush logs a last line that had no newline.
func (l *lineLogger) flush() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.partial) > 0 {
		l.log(string(l.partial))
		l.partial = nil
	}
}
