// SPDX-License-Identifier: Apache-2.0

package store

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
)

// Key sizes accepted from a key file.
const (
	MinKeyBytes = 32
	MaxKeyBytes = 64
)

// LoadKey reads a secret key from a protected file (owned by the service
// user, mode 0600, one link, no symbolic link; see policy.ReadProtected).
// The file holds 32 to 64 raw bytes, e.g. `head -c 32 /dev/urandom`.
func LoadKey(path string) ([]byte, error) {
	data, err := policy.ReadProtected(path, MaxKeyBytes)
	if err != nil {
		return nil, fmt.Errorf("load key: %w", err)
	}
	if len(data) < MinKeyBytes {
		return nil, fmt.Errorf("load key %s: %d bytes, need %d to %d", path, len(data), MinKeyBytes, MaxKeyBytes)
	}
	return data, nil
}

// ErrAuthorization is returned for any start authorization that does not
// verify; the reason is in the wrapped text, never in the type, so a
// caller cannot be tempted to treat some failures as soft.
var ErrAuthorization = errors.New("start authorization rejected")

// Authorizer issues and checks start authorizations: short-lived tokens
// bound to one session and both of its plan digests. Threat: a start
// request replayed against another session, or after the plan changed,
// or long after it was approved.
type Authorizer struct {
	key []byte
	ttl time.Duration
	now func() time.Time
}

// NewAuthorizer returns an Authorizer; ttl bounds a token's life.
func NewAuthorizer(key []byte, ttl time.Duration, now func() time.Time) (*Authorizer, error) {
	if len(key) < MinKeyBytes || len(key) > MaxKeyBytes {
		return nil, fmt.Errorf("new authorizer: key of %d bytes, need %d to %d", len(key), MinKeyBytes, MaxKeyBytes)
	}
	if ttl <= 0 || ttl > 10*time.Minute {
		return nil, fmt.Errorf("new authorizer: lifetime %v outside (0, 10m]", ttl)
	}
	if now == nil {
		now = time.Now
	}
	return &Authorizer{key: append([]byte(nil), key...), ttl: ttl, now: now}, nil
}

const authPrefix = "glove-start-v1"

// Issue returns a token for starting the session with these digests.
// Format: glove-start-v1.<expiry unix ms>.<nonce hex>.<mac hex>.
func (a *Authorizer) Issue(s Session) (string, time.Time, error) {
	var nonce [16]byte
	if _, err := rand.Read(nonce[:]); err != nil {
		return "", time.Time{}, fmt.Errorf("issue start authorization: %w", err)
	}
	exp := a.now().Add(a.ttl).UnixMilli()
	mac := a.mac(s, exp, nonce[:])
	tok := fmt.Sprintf("%s.%d.%s.%s", authPrefix, exp, hex.EncodeToString(nonce[:]), hex.EncodeToString(mac))
	return tok, time.UnixMilli(exp), nil
}

// Verify checks a token against the session's identity and digests and
// the clock.
func (a *Authorizer) Verify(token string, s Session) error {
	parts := strings.Split(token, ".")
	if len(parts) != 4 || parts[0] != authPrefix {
		return fmt.Errorf("%w: malformed token", ErrAuthorization)
	}
	exp, err := strconv.ParseInt(parts[1], 10, 64)
	if err != nil || parts[1] != strconv.FormatInt(exp, 10) {
		return fmt.Errorf("%w: malformed expiry", ErrAuthorization)
	}
	nonce, err := hex.DecodeString(parts[2])
	if err != nil || len(nonce) != 16 || hex.EncodeToString(nonce) != parts[2] {
		return fmt.Errorf("%w: malformed nonce", ErrAuthorization)
	}
	mac, err := hex.DecodeString(parts[3])
	if err != nil || len(mac) != sha256.Size || hex.EncodeToString(mac) != parts[3] {
		return fmt.Errorf("%w: malformed mac", ErrAuthorization)
	}
	if !hmac.Equal(mac, a.mac(s, exp, nonce)) {
		return fmt.Errorf("%w: not issued for session %s with these plan digests", ErrAuthorization, s.ID)
	}
	now := a.now().UnixMilli()
	if now >= exp {
		return fmt.Errorf("%w: expired", ErrAuthorization)
	}
	if exp-now > a.ttl.Milliseconds() {
		return fmt.Errorf("%w: expiry beyond the authorization lifetime", ErrAuthorization)
	}
	return nil
}

// mac binds the token to the session id and both digests, each length-
// prefixed so no two inputs share an encoding.
func (a *Authorizer) mac(s Session, exp int64, nonce []byte) []byte {
	h := hmac.New(sha256.New, a.key)
	var n [8]byte
	for _, f := range [][]byte{[]byte(authPrefix), []byte(s.ID), []byte(s.ControllerPlanDigest), []byte(s.PlanContentDigest), nonce} {
		binary.BigEndian.PutUint64(n[:], uint64(len(f)))
		h.Write(n[:])
		h.Write(f)
	}
	binary.BigEndian.PutUint64(n[:], uint64(exp))
	h.Write(n[:])
	return h.Sum(nil)
}
