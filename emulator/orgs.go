package emulator

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// addOrganization checks org and adds it to the organizations.
func (s *Server) addOrganization(org Organization) error {
	switch {
	case org.Domain == "":
		return errors.New("every organization needs a domain")
	case org.ID <= 0:
		return fmt.Errorf("organization %s: the id must be a positive integer", org.Domain)
	case !org.ActiveUntil.IsZero() && org.SubscribeLink != "":
		return fmt.Errorf("organization %s: a subscription is either active or unpaid, not both", org.Domain)
	}
	org.ActiveUntil = org.ActiveUntil.UTC()
	s.orgMu.Lock()
	defer s.orgMu.Unlock()
	switch {
	case s.byDomain[org.Domain] != nil:
		return fmt.Errorf("organization %s is configured twice", org.Domain)
	case s.byID[org.ID] != nil:
		return fmt.Errorf("organization %s: id %d is already used", org.Domain, org.ID)
	}
	p := &org
	s.orgs = append(s.orgs, p)
	s.byDomain[org.Domain] = p
	s.byID[org.ID] = p
	return nil
}

// AddOrganization adds an organization while the emulator runs, as the
// console does. Its domain and id must be new.
func (s *Server) AddOrganization(org Organization) error {
	if err := checkDomain(org.Domain); err != nil {
		return err
	}
	return s.addOrganization(org)
}

// checkDomain accepts a domain as organizations have them: lowercase
// letters, digits, dots and hyphens.
func checkDomain(domain string) error {
	if domain == "" || len(domain) > 253 {
		return errors.New("the domain must have 1 to 253 characters")
	}
	for _, c := range domain {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '-') {
			return fmt.Errorf("the domain %q may hold only lowercase letters, digits, dots and hyphens", domain)
		}
	}
	if strings.HasPrefix(domain, ".") || strings.HasSuffix(domain, ".") || strings.Contains(domain, "..") {
		return fmt.Errorf("the domain %q has an empty label", domain)
	}
	return nil
}

// nextOrganizationID is the id an added organization gets when it names
// none: one more than the largest.
func (s *Server) nextOrganizationID() int64 {
	s.orgMu.RLock()
	defer s.orgMu.RUnlock()
	var largest int64
	for id := range s.byID {
		largest = max(largest, id)
	}
	return largest + 1
}

// organization is a copy of the organization of domain.
func (s *Server) organization(domain string) (Organization, bool) {
	s.orgMu.RLock()
	defer s.orgMu.RUnlock()
	if org := s.byDomain[domain]; org != nil {
		return *org, true
	}
	return Organization{}, false
}

// organizationByID is a copy of the organization of id.
func (s *Server) organizationByID(id int64) (Organization, bool) {
	s.orgMu.RLock()
	defer s.orgMu.RUnlock()
	if org := s.byID[id]; org != nil {
		return *org, true
	}
	return Organization{}, false
}

// Organizations returns a copy of the organizations, in the order they
// were configured or added.
func (s *Server) Organizations() []Organization {
	s.orgMu.RLock()
	defer s.orgMu.RUnlock()
	out := make([]Organization, len(s.orgs))
	for i, org := range s.orgs {
		out[i] = *org
	}
	return out
}

// SetSubscription changes the subscription of the organization of domain:
// active until activeUntil when that is set, unpaid with subscribeLink
// when that is set, missing when neither is.
func (s *Server) SetSubscription(domain string, activeUntil time.Time, subscribeLink string) error {
	if !activeUntil.IsZero() && subscribeLink != "" {
		return errors.New("a subscription is either active or unpaid, not both")
	}
	s.orgMu.Lock()
	defer s.orgMu.Unlock()
	org := s.byDomain[domain]
	if org == nil {
		return errNoOrganization(domain)
	}
	org.ActiveUntil, org.SubscribeLink = activeUntil.UTC(), subscribeLink
	return nil
}

func errNoOrganization(domain string) error {
	return fmt.Errorf("emulator: no organization %q is configured", domain)
}
