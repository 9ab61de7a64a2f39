package pgwire

import (
	"crypto/hmac"
	"crypto/md5"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/moraine-db/moraine/internal/pgcode"

	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/xdg-go/scram"
)

// AuthMethod is how a user must prove who they are.
type AuthMethod int

const (
	// AuthTrust accepts the user without a password.
	AuthTrust AuthMethod = iota
	// AuthPassword asks for the password in clear text (use with TLS).
	AuthPassword
	// AuthMD5 is PostgreSQL's md5 challenge. A user whose Secret is a
	// SCRAM verifier is asked for SCRAM instead, as PostgreSQL does.
	AuthMD5
	// AuthSCRAM is SCRAM-SHA-256 (RFC 7677), without channel binding.
	AuthSCRAM
)

func (m AuthMethod) String() string {
	switch m {
	case AuthTrust:
		return "trust"
	case AuthPassword:
		return "password"
	case AuthMD5:
		return "md5"
	case AuthSCRAM:
		return "scram-sha-256"
	}
	return "AuthMethod(" + strconv.Itoa(int(m)) + ")"
}

// ParseAuthMethod parses the names String returns.
func ParseAuthMethod(s string) (AuthMethod, error) {
	for m := AuthTrust; m <= AuthSCRAM; m++ {
		if strings.EqualFold(s, m.String()) {
			return m, nil
		}
	}
	return 0, fmt.Errorf("pgwire: unknown auth method %q", s)
}

// User is one configured login.
//
// Secret is what the server stores, in one of PostgreSQL's pg_authid forms:
// a SCRAM verifier ("SCRAM-SHA-256$<iter>:<salt>$<StoredKey>:<ServerKey>",
// see SCRAMVerifier), an md5 hash ("md5" + hex(md5(password+user)), see
// MD5Verifier), or the plain password. A SCRAM verifier serves SCRAM and
// cleartext logins without the server ever knowing the password; md5
// needs an md5 hash or the plain password.
type User struct {
	Name   string
	Method AuthMethod
	Secret string
}

// scramIterations is PostgreSQL's default scram_iterations.
const scramIterations = 4096

// SCRAMVerifier derives a SCRAM-SHA-256 verifier for password with a
// random salt, in PostgreSQL's pg_authid format.
func SCRAMVerifier(password string) (string, error) {
	salt := make([]byte, 16)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("pgwire: salt: %w", err)
	}
	return scramVerifierWithSalt(password, salt, scramIterations)
}

func scramVerifierWithSalt(password string, salt []byte, iters int) (string, error) {
	client, err := scram.SHA256.NewClient("", password, "")
	if err != nil {
		return "", fmt.Errorf("pgwire: scram: %w", err)
	}
	sc := client.GetStoredCredentials(scram.KeyFactors{Salt: string(salt), Iters: iters})
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iters, b64(salt), b64(sc.StoredKey), b64(sc.ServerKey)), nil
}

// parseSCRAMVerifier parses PostgreSQL's verifier format.
func parseSCRAMVerifier(v string) (scram.StoredCredentials, bool) {
	rest, ok := strings.CutPrefix(v, "SCRAM-SHA-256$")
	if !ok {
		return scram.StoredCredentials{}, false
	}
	factors, keys, ok := strings.Cut(rest, "$")
	if !ok {
		return scram.StoredCredentials{}, false
	}
	iterS, saltS, ok1 := strings.Cut(factors, ":")
	storedS, serverS, ok2 := strings.Cut(keys, ":")
	if !ok1 || !ok2 {
		return scram.StoredCredentials{}, false
	}
	iters, err := strconv.Atoi(iterS)
	if err != nil || iters <= 0 {
		return scram.StoredCredentials{}, false
	}
	dec := base64.StdEncoding.DecodeString
	salt, err1 := dec(saltS)
	stored, err2 := dec(storedS)
	server, err3 := dec(serverS)
	if err1 != nil || err2 != nil || err3 != nil || len(stored) != sha256.Size || len(server) != sha256.Size {
		return scram.StoredCredentials{}, false
	}
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(salt), Iters: iters},
		StoredKey:  stored,
		ServerKey:  server,
	}, true
}

// MD5Verifier returns PostgreSQL's md5 password hash for user.
func MD5Verifier(user, password string) string {
	sum := md5.Sum([]byte(password + user))
	return "md5" + hex.EncodeToString(sum[:])
}

func isMD5Verifier(s string) bool {
	if len(s) != 35 || !strings.HasPrefix(s, "md5") {
		return false
	}
	_, err := hex.DecodeString(s[3:])
	return err == nil
}

// checkCleartext verifies a cleartext password against any stored form.
func checkCleartext(u User, password string) bool {
	if sc, ok := parseSCRAMVerifier(u.Secret); ok {
		client, err := scram.SHA256.NewClient("", password, "")
		if err != nil {
			return false
		}
		got := client.GetStoredCredentials(sc.KeyFactors)
		return subtle.ConstantTimeCompare(got.StoredKey, sc.StoredKey) == 1
	}
	if isMD5Verifier(u.Secret) {
		return subtle.ConstantTimeCompare([]byte(MD5Verifier(u.Name, password)), []byte(u.Secret)) == 1
	}
	return subtle.ConstantTimeCompare([]byte(password), []byte(u.Secret)) == 1
}

// errAuthFailed is the error clients get for any failed login; like
// PostgreSQL it does not say whether the user exists.
func errAuthFailed(user string, m AuthMethod) *Error {
	if m == AuthTrust {
		return &Error{Severity: SeverityFatal, Code: pgcode.InvalidAuthorizationSpecification,
			Message: fmt.Sprintf("role %q does not exist", user)}
	}
	return &Error{Severity: SeverityFatal, Code: pgcode.InvalidPassword,
		Message: fmt.Sprintf("password authentication failed for user %q", user)}
}

// errAuthProtocol is returned for a malformed or unexpected message during
// authentication.
func errAuthProtocol(format string, args ...any) *Error {
	return &Error{Severity: SeverityFatal, Code: pgcode.ProtocolViolation, Message: fmt.Sprintf(format, args...)}
}

// authenticate runs the exchange for user and returns nil when the client
// proved itself. trusted means the address matched a trust rule.
func (c *conn) authenticate(user string, trusted bool) error {
	if trusted {
		return nil
	}
	u, known := c.srv.users[user]
	if !known {
		// Run a SCRAM exchange against a verifier nobody knows, so an
		// unknown user is indistinguishable from a wrong password.
		return c.authSCRAM(User{Name: user, Method: AuthSCRAM}, false)
	}
	switch u.Method {
	case AuthTrust:
		return nil
	case AuthPassword:
		return c.authCleartext(u)
	case AuthMD5:
		if _, ok := parseSCRAMVerifier(u.Secret); ok {
			return c.authSCRAM(u, true)
		}
		return c.authMD5(u)
	case AuthSCRAM:
		return c.authSCRAM(u, true)
	}
	return errAuthFailed(user, u.Method)
}

// receivePassword reads the client's 'p' message for authType.
func (c *conn) receiveAuth(authType uint32) (pgproto3.FrontendMessage, error) {
	if err := c.be.SetAuthType(authType); err != nil {
		return nil, fmt.Errorf("pgwire: set auth type: %w", err)
	}
	if err := c.flush(); err != nil {
		return nil, err
	}
	msg, err := c.be.Receive()
	if err != nil {
		return nil, fmt.Errorf("pgwire: reading authentication response: %w", err)
	}
	return msg, nil
}

func (c *conn) authCleartext(u User) error {
	c.send(&pgproto3.AuthenticationCleartextPassword{})
	msg, err := c.receiveAuth(pgproto3.AuthTypeCleartextPassword)
	if err != nil {
		return err
	}
	pm, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return errAuthProtocol("expected password response, got message type %d", messageType(msg))
	}
	if !checkCleartext(u, pm.Password) {
		return errAuthFailed(u.Name, u.Method)
	}
	return nil
}

func (c *conn) authMD5(u User) error {
	var salt [4]byte
	if _, err := rand.Read(salt[:]); err != nil {
		return fmt.Errorf("pgwire: salt: %w", err)
	}
	c.send(&pgproto3.AuthenticationMD5Password{Salt: salt})
	msg, err := c.receiveAuth(pgproto3.AuthTypeMD5Password)
	if err != nil {
		return err
	}
	pm, ok := msg.(*pgproto3.PasswordMessage)
	if !ok {
		return errAuthProtocol("expected password response, got message type %d", messageType(msg))
	}
	stored := u.Secret
	if !isMD5Verifier(stored) {
		stored = MD5Verifier(u.Name, u.Secret)
	}
	sum := md5.Sum(append([]byte(stored[3:]), salt[:]...))
	want := "md5" + hex.EncodeToString(sum[:])
	if subtle.ConstantTimeCompare([]byte(pm.Password), []byte(want)) != 1 {
		return errAuthFailed(u.Name, u.Method)
	}
	return nil
}

const (
	scramMechanism     = "SCRAM-SHA-256"
	scramPlusMechanism = "SCRAM-SHA-256-PLUS"
)

// authSCRAM runs SCRAM-SHA-256. real is false for an unknown user: the
// exchange then runs against a mock verifier and always fails.
func (c *conn) authSCRAM(u User, real bool) error {
	creds, ok := parseSCRAMVerifier(u.Secret)
	if !ok {
		if real && u.Secret != "" && !isMD5Verifier(u.Secret) {
			// A plain password: derive a verifier now.
			v, err := SCRAMVerifier(u.Secret)
			if err != nil {
				return err
			}
			creds, _ = parseSCRAMVerifier(v)
		} else {
			// Unknown user, or an md5 hash (which cannot serve SCRAM):
			// fail after a full exchange, like a wrong password.
			creds = c.srv.mockSCRAM(u.Name)
			real = false
		}
	}
	srv, err := scram.SHA256.NewServer(func(string) (scram.StoredCredentials, error) {
		// libpq sends an empty SCRAM user name; the startup user counts.
		return creds, nil
	})
	if err != nil {
		return fmt.Errorf("pgwire: scram server: %w", err)
	}
	// Over TLS, offer SCRAM-SHA-256-PLUS with tls-server-end-point
	// channel binding (what libpq's channel_binding=prefer picks), which
	// ties the exchange to this TLS session.
	conv := srv.NewConversation()
	mechanisms := []string{scramMechanism}
	if cb, ok := serverEndpointBinding(c.tlsCert); ok {
		conv = srv.NewConversationWithChannelBinding(cb)
		mechanisms = []string{scramPlusMechanism, scramMechanism}
	}
	c.send(&pgproto3.AuthenticationSASL{AuthMechanisms: mechanisms})
	msg, err := c.receiveAuth(pgproto3.AuthTypeSASL)
	if err != nil {
		return err
	}
	init, ok := msg.(*pgproto3.SASLInitialResponse)
	if !ok {
		return errAuthProtocol("expected SASL response, got message type %d", messageType(msg))
	}
	if !slices.Contains(mechanisms, init.AuthMechanism) {
		return errAuthProtocol("client selected an invalid SASL authentication mechanism")
	}
	if plus := init.AuthMechanism == scramPlusMechanism; plus != strings.HasPrefix(string(init.Data), "p=") {
		// RFC 5802: the PLUS mechanism goes with a "p" binding flag and
		// only with it.
		return errAuthProtocol("malformed SCRAM message (channel binding flag does not match the mechanism)")
	}
	first, err := conv.Step(string(init.Data))
	if err != nil {
		return errAuthFailed(u.Name, AuthSCRAM)
	}
	c.send(&pgproto3.AuthenticationSASLContinue{Data: []byte(first)})
	msg, err = c.receiveAuth(pgproto3.AuthTypeSASLContinue)
	if err != nil {
		return err
	}
	resp, ok := msg.(*pgproto3.SASLResponse)
	if !ok {
		return errAuthProtocol("expected SASL response, got message type %d", messageType(msg))
	}
	final, err := conv.Step(string(resp.Data))
	if err != nil || !conv.Valid() || !real {
		return errAuthFailed(u.Name, AuthSCRAM)
	}
	c.send(&pgproto3.AuthenticationSASLFinal{Data: []byte(final)})
	if err := c.be.SetAuthType(pgproto3.AuthTypeOk); err != nil {
		return fmt.Errorf("pgwire: set auth type: %w", err)
	}
	return nil
}

// mockSCRAM returns verifier-shaped credentials for a user that cannot log
// in. The salt is derived from the user name and a secret (Config.MockAuthKey,
// stable across restarts; else one per process), so repeated attempts see a
// stable salt, as for a real user (PostgreSQL's scram_mock_salt does the
// same, from a nonce kept in pg_control); no key derivation is spent on it.
func (s *Server) mockSCRAM(user string) scram.StoredCredentials {
	s.mockOnce.Do(func() {
		if len(s.cfg.MockAuthKey) > 0 {
			s.mockKey = s.cfg.MockAuthKey
			return
		}
		s.mockKey = make([]byte, 32)
		_, _ = rand.Read(s.mockKey)
	})
	mac := hmac.New(sha256.New, s.mockKey)
	mac.Write([]byte(user))
	sum := mac.Sum(nil)
	return scram.StoredCredentials{
		KeyFactors: scram.KeyFactors{Salt: string(sum[:16]), Iters: scramIterations},
		StoredKey:  sum,
		ServerKey:  sum,
	}
}

// tlsConfig returns the server's TLS config for one handshake, wrapped so
// that the certificate it presents is recorded in c.tlsCert.
func (c *conn) tlsConfig() *tls.Config {
	orig := c.srv.cfg.TLS
	cfg := orig.Clone()
	// crypto/tls consults GetCertificate only without Certificates (or
	// with SNI); chooseCertificate falls back to orig's list itself.
	cfg.Certificates = nil
	cfg.GetCertificate = func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
		cert, err := chooseCertificate(orig, hi)
		c.tlsCert = cert
		return cert, err
	}
	return cfg
}

// chooseCertificate picks the certificate crypto/tls would pick for hi.
func chooseCertificate(cfg *tls.Config, hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if cfg.GetCertificate != nil {
		cert, err := cfg.GetCertificate(hi)
		if cert != nil || err != nil {
			return cert, err
		}
	}
	if len(cfg.Certificates) == 0 {
		return nil, errors.New("pgwire: no TLS certificate configured")
	}
	if len(cfg.Certificates) > 1 {
		for i := range cfg.Certificates {
			if hi.SupportsCertificate(&cfg.Certificates[i]) == nil {
				return &cfg.Certificates[i], nil
			}
		}
	}
	return &cfg.Certificates[0], nil
}

// serverEndpointBinding computes RFC 5929 tls-server-end-point channel
// binding data: the hash of the server certificate, with the hash of its
// signature algorithm (SHA-256 for MD5 and SHA-1).
func serverEndpointBinding(cert *tls.Certificate) (scram.ChannelBinding, bool) {
	if cert == nil || len(cert.Certificate) == 0 {
		return scram.ChannelBinding{}, false
	}
	leaf := cert.Leaf
	if leaf == nil {
		var err error
		if leaf, err = x509.ParseCertificate(cert.Certificate[0]); err != nil {
			return scram.ChannelBinding{}, false
		}
	}
	var sum []byte
	switch leaf.SignatureAlgorithm {
	case x509.SHA384WithRSA, x509.SHA384WithRSAPSS, x509.ECDSAWithSHA384:
		h := sha512.Sum384(leaf.Raw)
		sum = h[:]
	case x509.SHA512WithRSA, x509.SHA512WithRSAPSS, x509.ECDSAWithSHA512:
		h := sha512.Sum512(leaf.Raw)
		sum = h[:]
	case x509.MD5WithRSA, x509.SHA1WithRSA, x509.DSAWithSHA1, x509.ECDSAWithSHA1,
		x509.SHA256WithRSA, x509.SHA256WithRSAPSS, x509.ECDSAWithSHA256:
		h := sha256.Sum256(leaf.Raw)
		sum = h[:]
	default:
		return scram.ChannelBinding{}, false // e.g. Ed25519: no defined hash, offer plain SCRAM
	}
	return scram.ChannelBinding{Type: scram.ChannelBindingTLSServerEndpoint, Data: sum}, true
}

// messageType is the protocol's type byte of a frontend message, which
// PostgreSQL names in its errors ("got message type 81"), not a Go type.
func messageType(m pgproto3.FrontendMessage) int {
	b, err := m.Encode(nil)
	if err != nil || len(b) == 0 {
		return 0
	}
	return int(b[0])
}
