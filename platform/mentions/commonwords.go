package mentions

import "strings"

// commonWords are English words frequent enough in ordinary prose that a
// one-word name equal to one of them ("Apple", "Box", "Target", "Oracle")
// must be written as the graph writes it to count as a mention (see
// Ambiguous). The list: the most frequent English words plus everyday
// nouns and adjectives companies are often named after.
var commonWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(commonWordList) {
		m[w] = true
	}
	return m
}()

const commonWordList = `
the be to of and a in that have i it for not on with he as you do at this but his by from
they we say her she or an will my one all would there their what so up out if about who get
which go me when make can like time no just him know take people into year your good some
could them see other than then now look only come its over think also back after use two how
our work first well way even new want because any these give day most us is are was were been
has had did does done said made here where why each many much more less such very own same
few both those through during before between under again further once off down above below
all any every either neither other another next last long great little old big high small
large early young important public bad able best better sure free full true real general
open close clear right left late hard easy strong simple single whole main key top total
apple box square target oracle amazon shell delta visa unity slack zoom notion asana stripe
signal snap block square ring nest echo alpha beta gamma omega prime core base edge cloud
data net web link path bridge gate port harbor summit peak pioneer frontier vista horizon
global united national general standard universal digital smart secure rapid swift bright
sun star moon sky river lake ocean stone rock oak pine maple cedar eagle falcon fox lion tiger
bear wolf hawk phoenix orbit atlas titan apex vertex matrix vector pixel quantum fusion nova
office service services support system systems solution solutions group partner partners
network product products platform company corp inc ltd labs team client customer vendor
account order report plan project policy process program contract review update release
note notes issue issues change changes risk cost price value market sales business
`
