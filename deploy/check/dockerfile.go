package check

import (
	"bufio"
	"fmt"
	"os"
	"regexp"
	"strings"
)

// Instruction is one Dockerfile instruction with continuation lines joined.
type Instruction struct {
	Cmd  string // upper case: FROM, RUN, COPY, USER, ...
	Args string
	Line int
}

// Stage is a FROM and the instructions after it.
type Stage struct {
	From         string // the FROM arguments as written
	Base         string // the image, with global ARG defaults substituted
	Name         string // the AS name, if any
	Instructions []Instruction
}

// Dockerfile is a parsed Dockerfile: the global ARG defaults and the stages.
type Dockerfile struct {
	Path       string
	GlobalArgs map[string]string
	Stages     []Stage
}

// ParseDockerfile reads a Dockerfile: comments and blank lines are dropped,
// lines ending in a backslash are joined, instructions are grouped by stage.
func ParseDockerfile(path string) (*Dockerfile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	d := &Dockerfile{Path: path, GlobalArgs: map[string]string{}}
	var (
		cur   strings.Builder
		start int
		n     int
	)
	flush := func() error {
		text := strings.TrimSpace(cur.String())
		cur.Reset()
		if text == "" {
			return nil
		}
		cmd, args, _ := strings.Cut(text, " ")
		in := Instruction{Cmd: strings.ToUpper(cmd), Args: strings.TrimSpace(args), Line: start}
		switch {
		case in.Cmd == "FROM":
			st := Stage{From: in.Args}
			fields := strings.Fields(in.Args)
			var img []string
			for i := 0; i < len(fields); i++ {
				switch {
				case strings.HasPrefix(fields[i], "--"):
				case strings.EqualFold(fields[i], "AS") && i+1 < len(fields):
					st.Name = fields[i+1]
					i++
				default:
					img = append(img, fields[i])
				}
			}
			if len(img) != 1 {
				return fmt.Errorf("%s:%d: cannot read FROM %q", path, start, in.Args)
			}
			st.Base = d.expand(img[0])
			d.Stages = append(d.Stages, st)
		case len(d.Stages) == 0:
			if in.Cmd != "ARG" {
				return fmt.Errorf("%s:%d: %s before the first FROM", path, start, in.Cmd)
			}
			name, def, _ := strings.Cut(in.Args, "=")
			d.GlobalArgs[strings.TrimSpace(name)] = strings.Trim(strings.TrimSpace(def), `"`)
		default:
			s := &d.Stages[len(d.Stages)-1]
			s.Instructions = append(s.Instructions, in)
		}
		return nil
	}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 0, 64*1024), 1<<20)
	for sc.Scan() {
		n++
		line := sc.Text()
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "#") || (trimmed == "" && cur.Len() == 0) {
			continue
		}
		if cur.Len() == 0 {
			start = n
		}
		if strings.HasSuffix(trimmed, `\`) {
			cur.WriteString(strings.TrimSuffix(trimmed, `\`))
			cur.WriteString(" ")
			continue
		}
		cur.WriteString(trimmed)
		if err := flush(); err != nil {
			return nil, err
		}
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	if err := flush(); err != nil {
		return nil, err
	}
	if len(d.Stages) == 0 {
		return nil, fmt.Errorf("%s: no FROM", path)
	}
	return d, nil
}

var argRef = regexp.MustCompile(`\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?`)

// expand substitutes global ARG defaults ($NAME, ${NAME}) in s.
func (d *Dockerfile) expand(s string) string {
	return argRef.ReplaceAllStringFunc(s, func(m string) string {
		name := argRef.FindStringSubmatch(m)[1]
		if v, ok := d.GlobalArgs[name]; ok {
			return v
		}
		return m
	})
}

// Final is the last stage: the image that ships.
func (d *Dockerfile) Final() Stage { return d.Stages[len(d.Stages)-1] }

// Stage returns the stage named name.
func (d *Dockerfile) Stage(name string) (Stage, bool) {
	for _, s := range d.Stages {
		if s.Name == name {
			return s, true
		}
	}
	return Stage{}, false
}

var (
	targetCase = regexp.MustCompile(`([a-z][a-z0-9-]*)\)\s+pkg=(\./[^\s;]+)\s*;;`)
	ldflagsArg = regexp.MustCompile(`-ldflags\s+"([^"]*)"`)
)

// Targets returns the binaries a stage's RUN instructions can build, from the
// `NAME) pkg=./path ;;` lines of the case statement on BINARY.
func (s Stage) Targets() map[string]string {
	out := map[string]string{}
	for _, in := range s.Instructions {
		if in.Cmd != "RUN" {
			continue
		}
		for _, m := range targetCase.FindAllStringSubmatch(in.Args, -1) {
			out[m[1]] = m[2]
		}
	}
	return out
}

// BuildCommand returns the RUN instruction that runs `go build`.
func (s Stage) BuildCommand() (Instruction, bool) {
	for _, in := range s.Instructions {
		if in.Cmd == "RUN" && strings.Contains(in.Args, "go build") {
			return in, true
		}
	}
	return Instruction{}, false
}

// LDFlags returns the -ldflags value of the go build command, as written.
func (in Instruction) LDFlags() (string, bool) {
	m := ldflagsArg.FindStringSubmatch(in.Args)
	if m == nil {
		return "", false
	}
	return m[1], true
}

// Find returns a stage's instructions of one kind.
func (s Stage) Find(cmd string) []Instruction {
	var out []Instruction
	for _, in := range s.Instructions {
		if in.Cmd == cmd {
			out = append(out, in)
		}
	}
	return out
}
