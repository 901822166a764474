// The JSON API: every call sends the session cookie and turns an error answer into an Error.

export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

export async function call(method, path, body) {
  const options = { method, credentials: "same-origin", headers: {} };
  if (body instanceof FormData) {
    options.body = body; // multipart: the browser writes the boundary
  } else if (body !== undefined) {
    options.headers["Content-Type"] = "application/json";
    options.body = JSON.stringify(body);
  }
  const response = await fetch(`/api${path}`, options);
  if (response.status === 204) return null;
  const data = await response.json().catch(() => ({}));
  if (!response.ok) {
    const detail = data.errors ? Object.entries(data.errors).map(([k, v]) => `${k} ${[].concat(v).join(", ")}`).join("; ") : "";
    throw new ApiError(response.status, detail || data.error || `error ${response.status}`);
  }
  return data;
}

export const api = {
  get: (path) => call("GET", path),
  post: (path, body) => call("POST", path, body ?? {}),
  patch: (path, body) => call("PATCH", path, body),
  delete: (path) => call("DELETE", path),
};
