// Command machofat joins thin macOS executables (one per CPU) into one
// universal ("fat") Mach-O file, as Apple's lipo -create does. An MCPB
// manifest selects a server per operating system only (platform_overrides
// keys darwin, win32, linux), so macOS gets one file that runs natively on
// both arm64 and amd64. Each slice keeps its own code signature (Go signs
// darwin/arm64 binaries ad hoc), which the fat wrapper does not touch.
//
// Usage: go run ./deploy/mcpb/machofat -o out thin-arm64 thin-amd64
package main

import (
	"debug/macho"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"os"
)

// sliceAlign is the alignment of each slice (2^14, the arm64 page size;
// lipo uses it for arm64 and it is valid for amd64 too).
const sliceAlign = 14

func main() {
	out := flag.String("o", "", "output file")
	flag.Parse()
	if err := run(*out, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "machofat:", err)
		os.Exit(1)
	}
}

type slice struct {
	cpu    macho.Cpu
	subCPU uint32
	data   []byte
}

func run(out string, inputs []string) error {
	if out == "" || len(inputs) < 2 {
		return errors.New("usage: machofat -o out thin1 thin2 [...]")
	}
	slices := make([]slice, 0, len(inputs))
	seen := map[macho.Cpu]string{}
	for _, in := range inputs {
		f, err := macho.Open(in)
		if err != nil {
			return fmt.Errorf("%s is not a thin Mach-O file: %w", in, err)
		}
		cpu, sub := f.Cpu, f.SubCpu
		_ = f.Close()
		if prev, ok := seen[cpu]; ok {
			return fmt.Errorf("%s and %s are both %v", prev, in, cpu)
		}
		seen[cpu] = in
		data, err := os.ReadFile(in)
		if err != nil {
			return fmt.Errorf("read %s: %w", in, err)
		}
		slices = append(slices, slice{cpu: cpu, subCPU: sub, data: data})
	}
	return os.WriteFile(out, fat(slices), 0o755)
}

// fat lays out the fat header, one fat_arch record per slice (all fields
// big-endian), then each slice at an aligned offset.
func fat(slices []slice) []byte {
	const headerSize, archSize = 8, 20
	align := uint32(1) << sliceAlign
	offset := uint32(headerSize + archSize*len(slices))
	offsets := make([]uint32, len(slices))
	for i, s := range slices {
		offset = (offset + align - 1) &^ (align - 1)
		offsets[i] = offset
		offset += uint32(len(s.data))
	}
	buf := make([]byte, offset)
	be := binary.BigEndian
	be.PutUint32(buf[0:], macho.MagicFat)
	be.PutUint32(buf[4:], uint32(len(slices)))
	for i, s := range slices {
		rec := buf[headerSize+archSize*i:]
		be.PutUint32(rec[0:], uint32(s.cpu))
		be.PutUint32(rec[4:], s.subCPU)
		be.PutUint32(rec[8:], offsets[i])
		be.PutUint32(rec[12:], uint32(len(s.data)))
		be.PutUint32(rec[16:], sliceAlign)
		copy(buf[offsets[i]:], s.data)
	}
	return buf
}
