package token

// FromAuthorization returns the token of an Authorization header value
// that uses the Bearer scheme (in any letter case), and whether it does.
// Spaces around the token are dropped; a value with the Bearer scheme and
// nothing after it returns "", true, so the caller can tell an empty
// token from another scheme.
func FromAuthorization(value string) (string, bool) {
	const scheme = "bearer"
	if len(value) < len(scheme) {
		return "", false
	}
	for i := 0; i < len(scheme); i++ {
		c := value[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != scheme[i] {
			return "", false
		}
	}
	rest := value[len(scheme):]
	if rest != "" && rest[0] != ' ' && rest[0] != '\t' {
		return "", false // "Bearerx": another scheme
	}
	return trimSpace(rest), true
}

func trimSpace(s string) string {
	for s != "" && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for s != "" && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}

// IsB64Token reports whether s has the syntax of an RFC 6750 bearer token
// (b64token: letters, digits, "-", ".", "_", "~", "+", "/", then any "="
// padding). A JWT always has it; anything else cannot be a token of the
// service.
func IsB64Token(s string) bool {
	end := len(s)
	for end > 0 && s[end-1] == '=' {
		end--
	}
	if end == 0 {
		return false
	}
	for i := 0; i < end; i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}
