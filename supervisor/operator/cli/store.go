// SPDX-License-Identifier: Apache-2.0

package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/glove-sandbox/glove/supervisor/state/journal"
	"github.com/glove-sandbox/glove/supervisor/state/receipt"
	"github.com/glove-sandbox/glove/supervisor/state/store"
)

// storeFlags are glove store compact's flags.
type storeFlags struct{ dir, keyFile, anchor string }

func (o *storeFlags) define(fs *flag.FlagSet) {
	fs.StringVar(&o.dir, "session-store", DefaultStoreDir, "gloved's session store directory (run as its owner, the service user)")
	fs.StringVar(&o.keyFile, "receipt-key", "", "gloved's service key file; with --receipt-anchor, the receipt journal is compacted too")
	fs.StringVar(&o.anchor, "receipt-anchor", "", "the controller's trusted receipt anchor (64 hex)")
}

// storeCompact is `glove store compact`: the operator's compaction of a
// stopped gloved's journals (a running gloved compacts on its own and
// holds the writer lock, so this refuses then).
func storeCompact(args []string, stdout, stderr io.Writer) int {
	var o storeFlags
	fs := newFlags("glove store compact")
	o.define(fs)
	dir, keyFile, anchor := &o.dir, &o.keyFile, &o.anchor
	if err := fs.Parse(args); err != nil {
		if helpFlag(err, stdout, usageStore) {
			return ExitOK
		}
		fmt.Fprintf(stderr, "glove store compact: %v\n%s\n", err, usageStore)
		return ExitUsage
	}
	if fs.NArg() != 0 || (*keyFile == "") != (*anchor == "") {
		fmt.Fprintln(stderr, "glove store compact: --receipt-key and --receipt-anchor go together, and nothing else follows")
		return ExitUsage
	}
	locked := func(err error) int {
		if errors.Is(err, journal.ErrLocked) {
			fmt.Fprintf(stderr, "glove store compact: %s is held by a running gloved, which compacts it on its own (its log: \"event\":\"compacted\"); stop gloved to compact by hand\n", *dir)
		} else {
			fmt.Fprintf(stderr, "glove store compact: %s\n", strings.Join(strings.Fields(err.Error()), " "))
		}
		return ExitFail
	}
	st, _, err := store.Open(store.Options{Dir: *dir})
	if err != nil {
		return locked(err)
	}
	info, err := st.Compact()
	if cerr := st.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return locked(err)
	}
	fmt.Fprintf(stdout, "sessions.journal: %d records, %d bytes -> %d records, %d bytes (%d sessions kept, %d past the retention window dropped)\n",
		info.RecordsBefore, info.BytesBefore, info.RecordsAfter, info.BytesAfter, info.Sessions, info.Dropped)
	if *keyFile == "" {
		return ExitOK
	}
	key, err := store.LoadKey(*keyFile)
	if err != nil {
		return locked(err)
	}
	rj, _, err := receipt.Open(receipt.Options{Dir: *dir, Key: key, Anchor: *anchor})
	if err != nil {
		return locked(err)
	}
	rinfo, err := rj.Compact()
	if cerr := rj.Close(); err == nil && cerr != nil {
		err = cerr
	}
	if err != nil {
		return locked(err)
	}
	fmt.Fprintf(stdout, "receipts.journal: %d records, %d bytes -> %d records, %d bytes (%d acknowledged receipts dropped, %d kept)\n",
		rinfo.RecordsBefore, rinfo.BytesBefore, rinfo.RecordsAfter, rinfo.BytesAfter, rinfo.Dropped, rinfo.Carried)
	return ExitOK
}
