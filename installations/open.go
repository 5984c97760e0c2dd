package installations

import (
	"net/http"
	"time"

	"github.com/servicegate/servicegate/oauth"
)

// Config is what the installations of one app are made of: the book
// over its store, proved and renewed with the service's token endpoint,
// and the handler of its lifecycle calls.
type Config struct {
	// Book is the book's configuration; Open fills in its Grant (the
	// service_app grant with the client below) and its App (ClientID).
	Book BookConfig
	// Handler is the lifecycle handler's configuration; Open fills in its
	// Book and ClientID.
	Handler HandlerConfig
	// Service is the OAuth server's address; ClientID and ClientSecret
	// are the app's, with which it asks for app tokens.
	Service, ClientID, ClientSecret string
	// TokenTimeout bounds one request for an app token.
	TokenTimeout time.Duration
}

// Open makes the book and the lifecycle handler of cfg.
func Open(cfg Config) (*Book, *Handler, error) {
	client := &oauth.Client{AuthURL: cfg.Service, ClientID: cfg.ClientID, ClientSecret: cfg.ClientSecret,
		HTTP: &http.Client{Timeout: cfg.TokenTimeout}}
	cfg.Book.Grant, cfg.Book.App = ServiceGrant(client, nil), cfg.ClientID
	book, err := NewBook(cfg.Book)
	if err != nil {
		return nil, nil, err
	}
	cfg.Handler.Book, cfg.Handler.ClientID = book, cfg.ClientID
	handler, err := NewHandler(cfg.Handler)
	if err != nil {
		return nil, nil, err
	}
	return book, handler, nil
}
