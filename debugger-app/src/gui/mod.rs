//! The desktop debugger (eframe / egui 0.36, egui_graphs 0.32). The network runs on the
//! connection's own thread; each frame drains pending events within a time budget and
//! asks for a repaint when more are waiting, so the UI thread never waits on a socket.

pub mod app;
pub mod canvas;
pub mod graph;
pub mod mpstyle;
pub mod mpview;
pub mod node;
pub mod panels;
pub mod script;
pub mod session;
pub mod timeline;

use app::App;
use script::Script;
use session::{Session, Waker};
use std::sync::{Arc, Mutex};

/// Open the window on `session` (optionally scripted); returns the exit code.
pub fn run(session: Session, waker: Waker, script: Option<Script>, title: &str) -> i32 {
    run_app(title, move |cc| {
        let _ = waker.set(cc.egui_ctx.clone());
        App::new(session, script)
    })
}

/// Open the window on the app `make` builds; returns the exit code (a script's).
pub fn run_app(title: &str, make: impl FnOnce(&eframe::CreationContext<'_>) -> App + 'static) -> i32 {
    let options = eframe::NativeOptions {
        viewport: egui::ViewportBuilder::default()
            .with_inner_size([1280.0, 800.0])
            .with_title(title),
        ..Default::default()
    };
    let code = Arc::new(Mutex::new(0));
    let code2 = code.clone();
    let result = eframe::run_native(
        title,
        options,
        Box::new(move |cc| {
            Ok(Box::new(Exiting {
                app: make(cc),
                code: code2,
            }))
        }),
    );
    if let Err(e) = result {
        eprintln!("racetrack: cannot open the window: {e}");
        return 2;
    }
    let c = *code.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    c
}

/// Records the scripted exit code when the window closes.
struct Exiting {
    app: App,
    code: Arc<Mutex<i32>>,
}

impl eframe::App for Exiting {
    fn ui(&mut self, ui: &mut egui::Ui, frame: &mut eframe::Frame) {
        eframe::App::ui(&mut self.app, ui, frame);
        if let Some(c) = self.app.quit {
            *self
                .code
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner) = c;
        }
    }
}
