// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/authority/policy"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

const usageReceipt = "usage: glove receipt verify --key K [--anchor HEX] FILE"

// maxReceiptFile bounds what `glove receipt verify` reads: a page of
// receipts is at most 100 envelopes of about 1 KiB.
const maxReceiptFile = 1 << 20

// receiptFlags are glove receipt verify's flags.
type receiptFlags struct{ key, anchor string }

func (o *receiptFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.key, "key", "", "the service key file")
	fs.StringVar(&o.anchor, "anchor", strings.Repeat("0", 64), "the anchor the chain starts from (64 hex)")
}

// receiptVerify runs `glove receipt verify`: it checks the MACs and the
// chain of one envelope or a JSON array of envelopes (a page as
// receipts_page returns it, or a file `glove run --receipt` wrote)
// against the service key and the anchor the chain starts from, and
// prints what each receipt says.
func receiptVerify(args []string, stdout, stderr io.Writer) int {
	var o receiptFlags
	fs := newFlags("receipt verify")
	o.define(fs)
	keyFile, anchor := &o.key, &o.anchor
	err := fs.Parse(args)
	if helpFlag(err, stdout, usageReceipt) {
		return ExitOK
	}
	if err != nil || fs.NArg() != 1 || *keyFile == "" || !policy.ValidSHA256Hex(*anchor) {
		fmt.Fprintf(stderr, "glove: receipt verify: want --key K, an --anchor of 64 hex, and one FILE\n%s\n", usageReceipt)
		return ExitUsage
	}
	key, err := store.LoadKey(*keyFile)
	if err != nil {
		fmt.Fprintf(stderr, "glove: receipt verify: %v\n", err)
		return ExitFail
	}
	// Read like the policy: a protected file of the caller's, bounded.
	data, err := policy.ReadProtected(fs.Arg(0), maxReceiptFile)
	if err != nil {
		fmt.Fprintf(stderr, "glove: receipt verify: %v\n", err)
		return ExitFail
	}
	var envs []receipt.Envelope
	if t := strings.TrimSpace(string(data)); strings.HasPrefix(t, "[") {
		err = json.Unmarshal(data, &envs)
	} else {
		var e receipt.Envelope
		err = json.Unmarshal(data, &e)
		envs = []receipt.Envelope{e}
	}
	if err != nil || len(envs) == 0 {
		fmt.Fprintf(stderr, "glove: receipt verify: %s: not an envelope or a list of envelopes (%v)\n", fs.Arg(0), err)
		return ExitFail
	}
	if err := receipt.Verify(key, *anchor, envs); err != nil {
		fmt.Fprintf(stderr, "glove: receipt verify: %v\n", err)
		return ExitFail
	}
	for _, e := range envs {
		b := e.Body
		fmt.Fprintf(stdout, "seq %d  session %s  %s  exit %d  signal %d  cpu %d ms  memory peak %d  wall %d ms  output %d bytes\n",
			e.Seq, b.SessionID, b.Termination, b.ExitCode, b.Signal, b.Usage.CPUTimeMS, b.Usage.MemoryPeakBytes,
			b.Usage.WallTimeMS, b.Usage.TerminalOutputBytes)
	}
	fmt.Fprintf(stdout, "verified: %d receipt(s), chained from %s…, head %s…\n", len(envs), (*anchor)[:12], envs[len(envs)-1].EnvelopeMAC[:12])
	return ExitOK
}
