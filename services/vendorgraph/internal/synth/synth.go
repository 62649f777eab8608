// Package synth writes a deterministic synthetic vendor graph in the import
// format, for scale tests and benchmarks: the same parameters always give
// the same file, byte for byte.
//
// Shape: every vendor owns a cluster of entities. The vendor is tied
// directly to part of its cluster (its "core", 20 to all members); most
// relationships run between core members, the rest anywhere in the cluster,
// across clusters, or between vendors. So a vendor with a core of 100 has a
// neighbourhood of about 100 entities and several hundred relationships,
// the size the GetVendor benchmark asks for.
package synth

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
)

// Params sizes the graph.
type Params struct {
	Vendors       int
	Entities      int // vendors included
	Relationships int
	Seed          uint64
}

// Validate checks the sizes make a graph.
func (p Params) Validate() error {
	switch {
	case p.Vendors < 2:
		return errors.New("vendors: at least 2")
	case p.Vendors > len(stems)*len(stems)*len(stems):
		return fmt.Errorf("vendors: at most %d", len(stems)*len(stems)*len(stems))
	case p.Entities < p.Vendors*21:
		return errors.New("entities: at least 21 per vendor (20 core members)")
	case p.Relationships < p.Entities:
		return errors.New("relationships: at least one per entity")
	}
	return nil
}

var stems = []string{"vel", "or", "ix", "nor", "tha", "cor", "lum", "zen", "kai", "dra", "mer", "quo",
	"sar", "tel", "vin", "bra", "fen", "gal", "hal", "jor"}

var suffixes = []string{"Systems", "Corp", "Inc", "Ltd", "Labs", "Group", "Industries", "Technologies"}

// VendorStem is vendor i's unique one-word name, also its alias.
func VendorStem(i int) string {
	n := len(stems)
	// 7919 is prime to n³, so i ↦ i·7919 mod n³ is a bijection: unique stems.
	k := (i * 7919) % (n * n * n)
	s := stems[k/(n*n)] + stems[(k/n)%n] + stems[k%n]
	return strings.ToUpper(s[:1]) + s[1:]
}

// VendorName is vendor i's name.
func VendorName(i int) string { return VendorStem(i) + " " + suffixes[i%len(suffixes)] }

var memberTypes = []string{"PRODUCT", "PRODUCT", "PRODUCT", "PERSON", "PERSON", "ORG", "LOCATION", "EVENT", "TECHNOLOGY", "PERSON"}

var firstNames = []string{"Ada", "Ben", "Chen", "Dara", "Eli", "Fatima", "Goran", "Hana", "Ivan", "Jun", "Kofi", "Lena", "Mateo", "Nia", "Omar", "Priya"}
var lastNames = []string{"Adams", "Berg", "Costa", "Dubois", "Eriksen", "Fischer", "Garcia", "Haddad", "Ito", "Jensen", "Kowalski", "Larsen", "Moreau", "Novak"}
var productNouns = []string{"Analytics Suite", "Gateway", "Edge Node", "Ledger", "Sensor Kit", "Cloud Console", "Firewall", "Data Lake", "Scheduler", "Mobile SDK"}
var titles = []string{"Engineer", "Account Manager", "Director", "VP Sales", "Architect", "Analyst"}
var cities = []string{"Berlin", "Lagos", "Osaka", "Lima", "Oslo", "Pune", "Austin", "Leeds", "Porto", "Perth"}

type gen struct {
	p       Params
	rng     *rand.Rand
	w       *bufio.Writer
	enc     *json.Encoder
	types   []string // entity type by index; vendors first
	cluster [][2]int // [first, end) member indexes per vendor
	core    []int    // core size per vendor
	relN    int
	written int
}

// Write generates the graph into w: entities first, then relationships.
func Write(w io.Writer, p Params) error {
	if err := p.Validate(); err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 1<<20)
	g := &gen{p: p, rng: rand.New(rand.NewPCG(p.Seed, 0x5eed)), w: bw, enc: json.NewEncoder(bw)}
	g.enc.SetEscapeHTML(false)
	if err := g.entities(); err != nil {
		return err
	}
	if err := g.relationships(); err != nil {
		return err
	}
	return bw.Flush()
}

func (g *gen) conf(lo float64) float64 {
	return float64(int((lo+(1-lo)*g.rng.Float64())*100)) / 100
}

func (g *gen) emit(v any) error {
	g.written++
	return g.enc.Encode(v)
}

type entity struct {
	Kind       string         `json:"kind"`
	ID         string         `json:"id"`
	Name       string         `json:"name"`
	EntityType string         `json:"entity_type"`
	Confidence float64        `json:"confidence"`
	Snippet    string         `json:"snippet,omitempty"`
	Attributes map[string]any `json:"attributes,omitempty"`
	IsVendor   bool           `json:"is_vendor,omitempty"`
	Aliases    []string       `json:"aliases,omitempty"`
}

type relationship struct {
	Kind             string         `json:"kind"`
	ID               string         `json:"id"`
	SourceID         string         `json:"source_id"`
	TargetID         string         `json:"target_id"`
	RelationshipType string         `json:"relationship_type"`
	Confidence       float64        `json:"confidence"`
	Metadata         map[string]any `json:"metadata,omitempty"`
}

// EntityID is entity i's file id; vendors are 0..Vendors-1.
func EntityID(i int) string { return fmt.Sprintf("e%07d", i) }

func (g *gen) entities() error {
	p := g.p
	g.types = make([]string, p.Entities)
	for i := 0; i < p.Vendors; i++ {
		g.types[i] = "COMPANY"
		e := entity{Kind: "entity", ID: EntityID(i), Name: VendorName(i), EntityType: "COMPANY",
			Confidence: g.conf(0.8), IsVendor: true, Aliases: []string{VendorStem(i)},
			Snippet:    fmt.Sprintf("%s supplies %s to enterprise customers.", VendorName(i), strings.ToLower(productNouns[i%len(productNouns)])),
			Attributes: map[string]any{"tier": []string{"strategic", "approved", "probation"}[i%3], "founded": 1950 + i%70}}
		if err := g.emit(e); err != nil {
			return err
		}
	}
	// Members are split evenly; each vendor's core is 20..cluster size.
	members := p.Entities - p.Vendors
	g.cluster = make([][2]int, p.Vendors)
	g.core = make([]int, p.Vendors)
	next := p.Vendors
	for v := 0; v < p.Vendors; v++ {
		size := members / p.Vendors
		if v < members%p.Vendors {
			size++
		}
		g.cluster[v] = [2]int{next, next + size}
		g.core[v] = 20 + g.rng.IntN(size-20+1)
		for i := next; i < next+size; i++ {
			typ := memberTypes[g.rng.IntN(len(memberTypes))]
			g.types[i] = typ
			if err := g.emit(g.member(i, v, typ)); err != nil {
				return err
			}
		}
		next += size
	}
	return nil
}

func (g *gen) member(i, v int, typ string) entity {
	e := entity{Kind: "entity", ID: EntityID(i), EntityType: typ, Confidence: g.conf(0.5)}
	stem := VendorStem(v)
	switch typ {
	case "PRODUCT":
		e.Name = fmt.Sprintf("%s %s %d", stem, productNouns[g.rng.IntN(len(productNouns))], i%97)
		e.Attributes = map[string]any{"sku": fmt.Sprintf("%s-%05d", strings.ToUpper(stem[:3]), i%100000)}
	case "PERSON":
		e.Name = firstNames[g.rng.IntN(len(firstNames))] + " " + lastNames[g.rng.IntN(len(lastNames))]
		e.Attributes = map[string]any{"title": titles[g.rng.IntN(len(titles))]}
	case "ORG":
		e.Name = fmt.Sprintf("%s Partner Network %d", stem, i%53)
	case "LOCATION":
		e.Name = fmt.Sprintf("%s %s Office", cities[g.rng.IntN(len(cities))], stem)
	case "EVENT":
		e.Name = fmt.Sprintf("%s Summit %d", stem, 2015+i%10)
		e.Attributes = map[string]any{"year": 2015 + i%10}
	default:
		e.Name = fmt.Sprintf("%s Platform Component %d", stem, i%89)
	}
	if g.rng.IntN(2) == 0 {
		e.Snippet = fmt.Sprintf("%s associated with %s; extracted from procurement records.", e.Name, VendorName(v))
	}
	return e
}

func (g *gen) rel(src, tgt int, typ string) error {
	r := relationship{Kind: "relationship", ID: fmt.Sprintf("r%08d", g.relN), SourceID: EntityID(src),
		TargetID: EntityID(tgt), RelationshipType: typ, Confidence: g.conf(0.4)}
	if g.rng.IntN(10) < 3 {
		r.Metadata = map[string]any{"since": 2005 + g.rng.IntN(20)}
	}
	g.relN++
	return g.emit(r)
}

// vendorEdge ties a vendor to a member, direction and type by member type.
func (g *gen) vendorEdge(v, m int) error {
	switch g.types[m] {
	case "PRODUCT":
		return g.rel(v, m, "PRODUCES")
	case "PERSON":
		return g.rel(m, v, "WORKS_FOR")
	case "ORG":
		return g.rel(v, m, "PARTNERS_WITH")
	case "LOCATION":
		return g.rel(v, m, "LOCATED_IN")
	case "EVENT":
		return g.rel(v, m, "INVOLVED_IN")
	}
	return g.rel(v, m, "USES")
}

func (g *gen) memberEdge(a, b int) error {
	ta, tb := g.types[a], g.types[b]
	switch {
	case tb == "LOCATION":
		return g.rel(a, b, "LOCATED_IN")
	case ta == "PERSON" && tb == "PRODUCT":
		return g.rel(a, b, "MANAGES")
	case ta == "PERSON" && tb == "PERSON":
		return g.rel(a, b, "REPORTS_TO")
	case ta == "PRODUCT" && (tb == "TECHNOLOGY" || tb == "PRODUCT"):
		return g.rel(a, b, "DEPENDS_ON")
	case tb == "EVENT":
		return g.rel(a, b, "PARTICIPATES_IN")
	}
	return g.rel(a, b, "RELATED_TO")
}

// pair picks two distinct indexes from [lo, lo+n).
func (g *gen) pair(lo, n int) (int, int) {
	a := g.rng.IntN(n)
	b := g.rng.IntN(n - 1)
	if b >= a {
		b++
	}
	return lo + a, lo + b
}

func (g *gen) relationships() error {
	p := g.p
	for v := 0; v < p.Vendors; v++ {
		for m := g.cluster[v][0]; m < g.cluster[v][0]+g.core[v]; m++ {
			if err := g.vendorEdge(v, m); err != nil {
				return err
			}
		}
	}
	betweenVendors := p.Vendors * 3
	for k := 0; k < betweenVendors && g.relN < p.Relationships; k++ {
		a, b := g.pair(0, p.Vendors)
		if err := g.rel(a, b, []string{"COMPETES_WITH", "PARTNERS_WITH", "SUPPLIES"}[k%3]); err != nil {
			return err
		}
	}
	remaining := p.Relationships - g.relN
	crossClusters := remaining / 20
	perVendor := (remaining - crossClusters) / p.Vendors
	extra := (remaining - crossClusters) % p.Vendors
	for v := 0; v < p.Vendors; v++ {
		n := perVendor
		if v < extra {
			n++
		}
		lo, size := g.cluster[v][0], g.cluster[v][1]-g.cluster[v][0]
		for k := 0; k < n; k++ {
			var a, b int
			if g.rng.IntN(10) < 6 {
				a, b = g.pair(lo, g.core[v]) // among the vendor's direct neighbours
			} else {
				a, b = g.pair(lo, size)
			}
			if err := g.memberEdge(a, b); err != nil {
				return err
			}
		}
	}
	for g.relN < p.Relationships {
		a, b := g.pair(p.Vendors, p.Entities-p.Vendors)
		if err := g.memberEdge(a, b); err != nil {
			return err
		}
	}
	return nil
}
