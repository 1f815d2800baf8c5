// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"debug/elf"
	"encoding/binary"
	"runtime"
)

// FakeELF returns the bytes of a minimal ELF executable header for this
// machine (no program or section headers) followed by tag: what
// `glove policy stage` takes for a native, static entry point. It never
// runs; tests that stage a closure without executing it use it so that
// the closure's entry point is neither a script nor a real program.
func FakeELF(tag string) string {
	machine := elf.EM_X86_64
	if runtime.GOARCH == "arm64" {
		machine = elf.EM_AARCH64
	}
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS] = byte(elf.ELFCLASS64)
	h[elf.EI_DATA] = byte(elf.ELFDATA2LSB)
	h[elf.EI_VERSION] = byte(elf.EV_CURRENT)
	le := binary.LittleEndian
	le.PutUint16(h[16:], uint16(elf.ET_EXEC))
	le.PutUint16(h[18:], uint16(machine))
	le.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	le.PutUint16(h[52:], 64) // e_ehsize
	le.PutUint16(h[54:], 56) // e_phentsize
	le.PutUint16(h[58:], 64) // e_shentsize
	return string(h) + tag
}
