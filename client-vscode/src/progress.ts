/**
 * Server work-done progress as a VS Code notification with a Cancel button.
 *
 * vscode-languageclient shows server-created progress in the window (status bar) area, which has
 * no cancel button, so the extension answers `window/workDoneProgress/create` itself and drives
 * one notification per token from the `$/progress` begin/report/end values. Cancel sends
 * `window/workDoneProgress/cancel`; the server then kills the job's worker process group.
 */

export interface ProgressBegin {
  kind: "begin";
  title: string;
  cancellable?: boolean;
  message?: string;
  percentage?: number;
}

export interface ProgressReport {
  kind: "report";
  message?: string;
  percentage?: number;
}

export interface ProgressEnd {
  kind: "end";
  message?: string;
}

export type ProgressValue = ProgressBegin | ProgressReport | ProgressEnd;

export interface ProgressReporter {
  report(value: { message?: string; increment?: number }): void;
}

/** What the notification needs of VS Code (window.withProgress, at the Notification location). */
export interface ProgressUi {
  /** Shows a notification until `done` settles; `onCancel` runs when the user presses Cancel. */
  show(
    title: string,
    cancellable: boolean,
    onCancel: () => void,
    work: (reporter: ProgressReporter) => Promise<void>,
  ): void;
}

/** One server progress token, shown as one notification. */
export class NotificationProgress {
  private reporter: ProgressReporter | undefined;
  private pending: { message?: string; percentage?: number } | undefined;
  private reported = 0;
  private finish: (() => void) | undefined;
  private ended = false;

  constructor(
    private readonly ui: ProgressUi,
    private readonly cancel: () => void,
  ) {}

  handle(value: ProgressValue): void {
    if (this.ended) {
      return;
    }
    switch (value.kind) {
      case "begin":
        this.begin(value);
        break;
      case "report":
        this.report(value);
        break;
      case "end":
        this.end();
        break;
    }
  }

  get done(): boolean {
    return this.ended;
  }

  private begin(value: ProgressBegin): void {
    if (this.finish !== undefined) {
      return;
    }
    const finished = new Promise<void>((resolve) => {
      this.finish = resolve;
    });
    this.pending = {
      message: value.message ?? this.pending?.message,
      percentage: value.percentage ?? this.pending?.percentage,
    };
    this.ui.show(value.title, value.cancellable !== false, this.cancel, (reporter) => {
      this.reporter = reporter;
      if (this.pending !== undefined) {
        this.report({ kind: "report", ...this.pending });
        this.pending = undefined;
      }
      return finished;
    });
  }

  private report(value: { kind: "report"; message?: string; percentage?: number }): void {
    if (this.reporter === undefined) {
      this.pending = { message: value.message ?? this.pending?.message, percentage: value.percentage };
      return;
    }
    let increment: number | undefined;
    if (typeof value.percentage === "number") {
      const pct = Math.max(0, Math.min(100, value.percentage));
      increment = Math.max(0, pct - this.reported);
      this.reported += increment;
    }
    this.reporter.report({ message: value.message, increment });
  }

  private end(): void {
    this.ended = true;
    this.finish?.();
  }
}
