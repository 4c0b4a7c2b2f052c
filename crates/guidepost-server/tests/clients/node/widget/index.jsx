// Test page for the official Parlant chat widget (parlant-chat-react).
//
// Query string parameters:
//   server   base URL of the API server (required), e.g. http://127.0.0.1:8800
//   agent    agent id (required unless session is given); the widget creates a
//            session on the first message when no session is given
//   session  existing session id (optional)
//   customer customer id (optional; the server's default is "guest")
//   float    "1" renders the floating popup button, anything else renders inline
import { createRoot } from 'react-dom/client';
import ParlantChatbox from 'parlant-chat-react';
import 'parlant-chat-react/style.css';

const params = new URLSearchParams(window.location.search);
const server = params.get('server');
const agentId = params.get('agent') || undefined;
const sessionId = params.get('session') || undefined;
const customerId = params.get('customer') || undefined;
const float = params.get('float') === '1';

// Expose what the widget did so the driver (widget.mjs) can read it.
window.__guidepost = { server, agentId, sessionId, customerId, float, createdSessions: [] };

const root = createRoot(document.getElementById('root'));
if (!server) {
  root.render(<p id="config-error">missing ?server= parameter</p>);
} else {
  root.render(
    <ParlantChatbox
      server={server}
      agentId={agentId}
      sessionId={sessionId}
      customerId={customerId}
      float={float}
      titleFn={() => 'guidepost widget conformance'}
      onSessionCreated={(id) => {
        window.__guidepost.createdSessions.push(id);
        document.body.dataset.sessionId = id;
      }}
    />,
  );
}
document.body.dataset.ready = '1';
