// SPDX-License-Identifier: Apache-2.0

package session

import (
	"fmt"
	"strings"

	"golang.org/x/sys/unix"
)

// The program's terminal when nobody says otherwise: what a terminal
// emulator or a console usually is. A pty that starts at 0×0 makes
// full-screen programs (codex's TUI) draw nothing until their first
// resize, and a program without TERM falls back to a dumb terminal.
const (
	DefaultTerm = "xterm-256color"
	DefaultRows = 24
	DefaultCols = 80
)

// MaxTermSide bounds a terminal's rows and columns: a struct winsize
// holds 16 bits for each (the resize method's bound too).
const MaxTermSide = 65535

// TermSize is a terminal size at start, checked: both sides
// 1..MaxTermSide.
func TermSize(rows, cols uint32) (unix.Winsize, error) {
	if rows < 1 || rows > MaxTermSide || cols < 1 || cols > MaxTermSide {
		return unix.Winsize{}, fmt.Errorf("terminal size %d×%d: rows and cols must be 1..%d", rows, cols, MaxTermSide)
	}
	return unix.Winsize{Row: uint16(rows), Col: uint16(cols)}, nil
}

// SaneTerm says whether t can be a terminal type name: 1..64 of
// [A-Za-z0-9._+-], which every terminfo name is. Anything else from an
// operator's environment (a control character, a path, a very long
// value) is not passed into the sandbox.
func SaneTerm(t string) bool {
	if len(t) == 0 || len(t) > 64 {
		return false
	}
	for i := 0; i < len(t); i++ {
		c := t[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '+' || c == '-') {
			return false
		}
	}
	return true
}

// SetTerm gives a program on a terminal TERM=term unless its environment
// (the runtime template's) already sets TERM, which the operator chose.
// Call it before LaunchDigest: TERM is part of the environment the
// program runs with, so it is in the managed-launch digest like every
// other variable (the digest says exactly what the program was given;
// for managed sessions it is the constant DefaultTerm, so one plan still
// gives one digest). A launch without a terminal is left as it is.
func (l *Launch) SetTerm(term string) {
	if !l.Terminal {
		return
	}
	for _, e := range l.Env {
		if strings.HasPrefix(e, "TERM=") {
			return
		}
	}
	l.Env = append(append([]string(nil), l.Env...), "TERM="+term)
}
