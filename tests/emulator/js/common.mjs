// Shared by the scripts tests/emulator/test_js_sdk.py runs: the connection string comes in as argv[2],
// results go out as one JSON line on stdout. Written for sbnotebook's tests.
import { ServiceBusAdministrationClient, ServiceBusClient } from "@azure/service-bus";

export const connectionString = process.argv[2];
export const args = process.argv.slice(3);

// Fail fast instead of retrying: a test waits for the answer, not for the SDK's backoff.
export function client() {
  return new ServiceBusClient(connectionString, { retryOptions: { maxRetries: 0, timeoutInMs: 10000 } });
}

// The JS admin client always speaks HTTPS; the emulator serves its admin API as plain HTTP on the
// AMQP port, so this client's requests are sent as http:// (the only change to the SDK's requests).
export function adminClient() {
  const admin = new ServiceBusAdministrationClient(connectionString);
  admin.pipeline.addPolicy({
    name: "sbnotebook-emulator-plain-http",
    sendRequest(request, next) {
      request.url = request.url.replace(/^https:/, "http:");
      request.allowInsecureConnection = true;
      return next(request);
    },
  });
  return admin;
}

export function emit(result) {
  process.stdout.write(JSON.stringify(result) + "\n");
}

export function text(body) {
  return typeof body === "string" ? body : Buffer.isBuffer(body) ? body.toString() : JSON.stringify(body);
}

// Runs main(); any error is printed as {"error": ...} with exit code 1.
export async function run(main) {
  try {
    emit(await main());
    process.exit(0);
  } catch (err) {
    emit({ error: `${err?.name ?? "Error"}: ${err?.message ?? err}`, code: err?.code ?? null });
    process.exit(1);
  }
}
