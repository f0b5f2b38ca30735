package triad

import (
	"fmt"
	"os"
	"strings"

	"github.com/nats-io/nats.go"
)

// AgentInbox is the inbox prefix of an agent identity of one type (decision 0016): its permissions let it
// subscribe only there, so its JetStream API replies and publish acknowledgements must come back under it.
func (n Names) AgentInbox(agentType string) string { return "_INBOX." + n.NS + "._agent." + agentType }

// ConnectOptions reads the NATS settings every Triad process reads (README, Configuration): at most one
// of NATS_CREDS (a .creds file), NATS_NKEY_SEED (a seed file), NATS_USER with NATS_PASSWORD, NATS_TOKEN;
// and NATS_TLS_CA (a private CA), NATS_TLS_CERT with NATS_TLS_KEY (mutual TLS). A setting that cannot be
// used is refused with its name and what to set.
func ConnectOptions(getenv func(string) string) ([]nats.Option, error) {
	get := func(k string) string { return strings.TrimSpace(getenv(k)) }
	file := func(k string) (string, error) {
		p := get(k)
		if p == "" {
			return "", nil
		}
		if st, err := os.Stat(p); err != nil || st.IsDir() {
			return "", fmt.Errorf("%s=%s is not a readable file: point it at the file or unset it", k, p)
		}
		return p, nil
	}
	var opts []nats.Option
	auth := []string{}
	for _, k := range []string{"NATS_CREDS", "NATS_NKEY_SEED", "NATS_USER", "NATS_TOKEN"} {
		if get(k) != "" {
			auth = append(auth, k)
		}
	}
	if len(auth) > 1 {
		return nil, fmt.Errorf("%s are all set: choose one way to authenticate to NATS", strings.Join(auth, " and "))
	}
	if p, err := file("NATS_CREDS"); err != nil {
		return nil, err
	} else if p != "" {
		opts = append(opts, nats.UserCredentials(p))
	}
	if p, err := file("NATS_NKEY_SEED"); err != nil {
		return nil, err
	} else if p != "" {
		o, err := nats.NkeyOptionFromSeed(p)
		if err != nil {
			return nil, fmt.Errorf("NATS_NKEY_SEED=%s holds no nkey seed (%v): point it at the seed file (SU…)", p, err)
		}
		opts = append(opts, o)
	}
	if u := get("NATS_USER"); u != "" {
		if get("NATS_PASSWORD") == "" {
			return nil, fmt.Errorf("NATS_USER is set without NATS_PASSWORD: set both")
		}
		opts = append(opts, nats.UserInfo(u, get("NATS_PASSWORD")))
	} else if get("NATS_PASSWORD") != "" {
		return nil, fmt.Errorf("NATS_PASSWORD is set without NATS_USER: set both")
	}
	if t := get("NATS_TOKEN"); t != "" {
		opts = append(opts, nats.Token(t))
	}
	if p, err := file("NATS_TLS_CA"); err != nil {
		return nil, err
	} else if p != "" {
		opts = append(opts, nats.RootCAs(p))
	}
	cert, err := file("NATS_TLS_CERT")
	if err != nil {
		return nil, err
	}
	key, err := file("NATS_TLS_KEY")
	if err != nil {
		return nil, err
	}
	if (cert == "") != (key == "") {
		return nil, fmt.Errorf("NATS_TLS_CERT and NATS_TLS_KEY go together (mutual TLS): set both or neither")
	}
	if cert != "" {
		opts = append(opts, nats.ClientCert(cert, key))
	}
	return opts, nil
}
