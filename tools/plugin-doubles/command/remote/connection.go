package remote

import (
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"time"

	p "github.com/pulumi/pulumi-go-provider"
	"github.com/pulumi/pulumi-go-provider/infer"
	"github.com/pulumi/pulumi/sdk/v3/go/common/util/retry"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
)

// Connection is how to reach the host: the real plugin's fields and defaults, without the
// bastion `proxy`, which this program does not use.
type Connection struct {
	Host               *string  `pulumi:"host"`
	Port               *float64 `pulumi:"port,optional"`
	User               *string  `pulumi:"user,optional"`
	Password           *string  `pulumi:"password,optional"           provider:"secret"`
	PrivateKey         *string  `pulumi:"privateKey,optional"         provider:"secret"`
	PrivateKeyPassword *string  `pulumi:"privateKeyPassword,optional" provider:"secret"`
	AgentSocketPath    *string  `pulumi:"agentSocketPath,optional"`
	HostKey            *string  `pulumi:"hostKey,optional"`
	DialErrorLimit     *int     `pulumi:"dialErrorLimit,optional"`
	PerDialTimeout     *int     `pulumi:"perDialTimeout,optional"`
}

const (
	defaultDialErrorLimit = 10
	unlimitedDialErrors   = -1
)

func (c *Connection) Annotate(a infer.Annotator) {
	a.Describe(&c, "Instructions for how to connect to a remote endpoint.")
	a.SetDefault(&c.Port, 22)
	a.SetDefault(&c.User, "root")
	a.SetDefault(&c.DialErrorLimit, defaultDialErrorLimit)
	a.SetDefault(&c.PerDialTimeout, 15)
	a.Describe(&c.HostKey, "The expected host key (authorized_keys format); when unset, any host key is accepted.")
	a.Describe(&c.DialErrorLimit, "Failed dials tolerated before giving up; -1: no limit.")
	a.Describe(&c.PerDialTimeout, "Seconds each TCP connect may take; 0: no limit.")
}

// clientConfig authenticates with, in this order, the private key, the password (also as
// keyboard-interactive answers) and the SSH agent (agentSocketPath, else $SSH_AUTH_SOCK).
// release closes the agent's connection, which only the handshake needs.
func (c *Connection) clientConfig() (config *ssh.ClientConfig, release func(), err error) {
	release = func() {}
	config = &ssh.ClientConfig{
		User:            valueOr(c.User, "root"),
		HostKeyCallback: ssh.InsecureIgnoreHostKey(), //nolint:gosec // the real plugin's behaviour without hostKey
		Timeout:         time.Duration(valueOr(c.PerDialTimeout, 15)) * time.Second,
	}
	if c.HostKey != nil {
		pinned, _, _, _, err := ssh.ParseAuthorizedKey([]byte(*c.HostKey))
		if err != nil {
			return nil, release, fmt.Errorf("failed to parse host key: %w", err)
		}
		config.HostKeyCallback = ssh.FixedHostKey(pinned)
		// Only the pinned key's algorithm is offered, so the server presents that key.
		config.HostKeyAlgorithms = []string{pinned.Type()}
	}
	if c.PrivateKey != nil {
		var signer ssh.Signer
		var err error
		if c.PrivateKeyPassword != nil {
			signer, err = ssh.ParsePrivateKeyWithPassphrase([]byte(*c.PrivateKey), []byte(*c.PrivateKeyPassword))
		} else {
			signer, err = ssh.ParsePrivateKey([]byte(*c.PrivateKey))
		}
		if err != nil {
			return nil, release, err
		}
		config.Auth = append(config.Auth, ssh.PublicKeys(signer))
	}
	if c.Password != nil {
		password := *c.Password
		config.Auth = append(config.Auth, ssh.Password(password),
			ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
				answers := make([]string, len(questions))
				for i := range answers {
					answers[i] = password
				}
				return answers, nil
			}))
	}
	socket := os.Getenv("SSH_AUTH_SOCK")
	if c.AgentSocketPath != nil {
		socket = *c.AgentSocketPath
	}
	if socket != "" {
		conn, err := net.Dial("unix", socket)
		if err != nil {
			return nil, release, err
		}
		release = func() { _ = conn.Close() }
		config.Auth = append(config.Auth, ssh.PublicKeysCallback(agent.NewClient(conn).Signers))
	}
	return config, release, nil
}

// dial connects, retrying any failure (refused, timed out, handshake, authentication) with
// the SDK's backoff (100 ms, x1.5, at most 5 s) until dialErrorLimit retries have failed:
// the limit counts retries, so a limit of N dials N+1 times.
func (c *Connection) dial(ctx context.Context) (*ssh.Client, error) {
	config, release, err := c.clientConfig()
	defer release()
	if err != nil {
		return nil, err
	}
	endpoint := net.JoinHostPort(valueOr(c.Host, ""), strconv.Itoa(int(valueOr(c.Port, 22))))
	limit := valueOr(c.DialErrorLimit, defaultDialErrorLimit)
	limitText := strconv.Itoa(limit)
	if limit == unlimitedDialErrors {
		limitText = "inf"
	}
	var client *ssh.Client
	accepted, _, err := retry.Until(ctx, retry.Acceptor{
		Accept: func(try int, _ time.Duration) (bool, any, error) {
			var dialErr error
			client, dialErr = ssh.Dial("tcp", endpoint, config)
			if dialErr == nil {
				return true, nil, nil
			}
			dials := try + 1
			if limit > unlimitedDialErrors && dials > limit {
				return true, nil, fmt.Errorf("after %d failed attempts: %w", try, dialErr)
			}
			p.GetLogger(ctx).InfoStatusf("Dial %d/%s failed: retrying", dials, limitText)
			return false, nil, nil
		},
	})
	switch {
	case err != nil:
		return nil, err
	case !accepted:
		return nil, ctx.Err() // cancelled while waiting to retry
	}
	return client, nil
}

func valueOr[T any](value *T, otherwise T) T {
	if value == nil {
		return otherwise
	}
	return *value
}
