// SPDX-License-Identifier: Apache-2.0

// Package wiredoc describes helper protocols for the documentation:
// docs/helpers.md's and SECURITY.md's tables are generated from each
// protocol's declaration (helpers/helperkit's TestSecurityDoc).
package wiredoc

import (
	"fmt"
	"reflect"
	"strings"

	"github.com/glove-sandbox/glove/helpers/wire"
)

// Accepts names p's requests, e.g. "Hello (once), Bind, Tmpfs".
func Accepts(p *wire.Protocol) string {
	var out []string
	for _, d := range p.Routes() {
		n := strings.TrimSuffix(d.Request().Go().Elem().Name(), "Request")
		if d.Once() {
			n += " (once)"
		}
		out = append(out, n)
	}
	return strings.Join(out, ", ")
}

// Markdown is p's table: one row per request and its reply.
func Markdown(p *wire.Protocol) string {
	var b strings.Builder
	b.WriteString("| type | request | payload | fds | reply | payload | fds | once |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, d := range p.Routes() {
		once := "no"
		if d.Once() {
			once = "yes"
		}
		q, r := d.Request(), d.Reply()
		fmt.Fprintf(&b, "| `%#04x` | %s | %s | %d | %s | %s | %d | %s |\n", uint16(q.Type()),
			q.Go().Elem().Name(), fields(q), q.FDs(), r.Go().Elem().Name(), fields(r), r.FDs(), once)
	}
	return b.String()
}

// fields describes a message's payload, e.g. "Name string(64), Flags
// uint32", or "(empty)".
func fields(k *wire.Kind) string {
	t := k.Go().Elem()
	if t.NumField() == 0 {
		return "(empty)"
	}
	out := make([]string, t.NumField())
	for i := range out {
		f := t.Field(i)
		switch k := f.Type.Kind(); k {
		case reflect.String, reflect.Slice: // their maximum is the tag (checked by package wire)
			out[i] = f.Name + " " + strings.Replace(k.String(), "slice", "bytes", 1) + "(" + f.Tag.Get("wire") + ")"
		default:
			out[i] = f.Name + " " + k.String()
		}
	}
	return strings.Join(out, ", ")
}
