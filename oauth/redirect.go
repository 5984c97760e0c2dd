package oauth

import (
	"fmt"
	"net/url"
	"strings"
)

// ParseRedirectURI reads the redirect URI of a Handler as a user writes
// it: a path on the site (callbackPath is it, absolute is empty: the
// absolute URI is built from the site's origin), or an absolute http(s)
// URL without a fragment (callbackPath is its path).
func ParseRedirectURI(uri string) (callbackPath, absolute string, err error) {
	if strings.HasPrefix(uri, "/") {
		return uri, "", nil
	}
	u, err := url.Parse(uri)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Fragment != "" {
		return "", "", fmt.Errorf("redirect_uri %q must be a path or an absolute http(s) URL", uri)
	}
	if !strings.HasPrefix(u.Path, "/") {
		return "", "", fmt.Errorf("redirect_uri %q needs a path", uri)
	}
	return u.Path, uri, nil
}
