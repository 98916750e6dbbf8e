import native from "../native/loader.cjs";

export default native;
export type NativeTask = native.NativeTask;
export type NativeWorker = native.NativeWorker;
export type NativeDatabase = native.Database;
