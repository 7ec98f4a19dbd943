package filter

// keywords are the words of pcap-filter(7) this compiler reads, most used
// first: a misspelling of one is suggested in that order.
var keywords = []string{
	"port", "host", "net", "src", "dst", "and", "or", "not", "udp", "tcp",
	"portrange", "proto", "ip", "ip6", "icmp", "icmp6", "ether", "vlan", "arp",
	"rarp", "sctp", "igmp", "mask", "len", "less", "greater", "broadcast",
	"multicast",
}

// suggestKeyword returns the keyword w is probably a misspelling of, or ""
// when none is close: one edit away (a letter added, dropped, changed, or
// two neighbours swapped) for words of up to four letters, two for longer
// ones, so that short host names are not taken for keywords. Of equally
// close keywords it prefers one of w's length ("prot": port, not proto).
func suggestKeyword(w string) string {
	if len(w) < 2 || len(w) > 16 {
		return ""
	}
	for _, r := range w {
		if (r < 'a' || r > 'z') && (r < '0' || r > '9') && r != '-' {
			return "" // an address, a MAC, a quoted name: not a misspelt keyword
		}
	}
	limit := 1
	if len(w) > 4 {
		limit = 2
	}
	best, bestD, bestL := "", limit+1, 0
	for _, k := range keywords {
		if k == w {
			return ""
		}
		d := editDistance(w, k)
		l := len(k) - len(w)
		if l < 0 {
			l = -l
		}
		if d < bestD || d == bestD && l < bestL {
			best, bestD, bestL = k, d, l
		}
	}
	return best
}

// editDistance is the optimal string alignment distance of a and b
// (Levenshtein with adjacent transpositions) over bytes.
func editDistance(a, b string) int {
	prev2 := make([]int, len(b)+1)
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(b)]
}
