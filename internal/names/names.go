// Package names gives the String of servicegate's enumerations (outcomes,
// events): a word from a table, and a plain number for a value outside it.
package names

import "strconv"

// Of is table[v], or kind and the number when v is outside table.
func Of[V ~int](table []string, v V, kind string) string {
	if v < 0 || int(v) >= len(table) {
		return kind + " " + strconv.Itoa(int(v))
	}
	return table[v]
}
