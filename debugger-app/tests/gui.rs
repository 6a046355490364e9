//! The GUI's real widgets, driven through AccessKit (egui_kittest), against real example
//! processes with the agent, over a real WebSocket.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use egui::accesskit::Role;
use egui_kittest::kittest::{NodeT, Queryable};
use egui_kittest::Harness;
use racetrack::gui::app::App;
use racetrack::gui::session::{Session, Waker};
use racetrack::model::{NodeId, NodeStatus};
use racetrack_protocol::Event;
use std::time::{Duration, Instant};

fn harness(example: &str, args: &[&str]) -> Harness<'static, App> {
    let prog = support::example_bin(example).display().to_string();
    let args: Vec<String> = args.iter().map(|s| (*s).to_owned()).collect();
    let session = Session::launch(&prog, &args, Waker::default()).expect("launch");
    Harness::builder()
        .with_size((1400.0, 1000.0))
        .build_ui_state(|ui, app: &mut App| app.frame_ui(ui), App::new(session, None))
}

/// The unfolded node of (`op`, `thread`), which must have run.
fn node_id(app: &App, op: &str, thread: &str) -> NodeId {
    let key = app.model.node_key(op, thread).unwrap();
    app.model.unfolded().and_then(|u| u.find(key)).unwrap()
}

/// The messages node (`op`, `thread`) processed (none if it never ran).
fn processed(app: &App, op: &str, thread: &str) -> Vec<String> {
    let node = app.model.node_named(op, thread);
    node.map(|n| n.processed.iter().map(|m| m.to_string()).collect())
        .unwrap_or_default()
}

/// Run frames until `pred` holds (the network is on its own thread: poll, don't block).
fn pump(h: &mut Harness<'static, App>, what: &str, pred: impl Fn(&App) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        h.step();
        if pred(h.state()) {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "timed out waiting for {what}; log: {:?}",
            h.state().model.control.log
        );
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn last_output(app: &App) -> serde_json::Value {
    app.model
        .control
        .log
        .iter()
        .rev()
        .find(|l| l.level == "stdout")
        .map(|l| serde_json::from_str(&l.text).unwrap())
        .unwrap_or_default()
}

/// The toolbar's Continue (drawn first), or a breakpoint row's.
fn continue_button(h: &Harness<'static, App>, nth: usize) -> bool {
    let buttons: Vec<_> = h.get_all_by_role_and_label(Role::Button, "Continue").collect();
    let b = &buttons[nth];
    if std::env::var("GUI_DEBUG").is_ok() {
        for (i, x) in buttons.iter().enumerate() {
            eprintln!(
                "continue #{i}: {:?} disabled={}",
                x.rect(),
                x.accesskit_node().is_disabled()
            );
        }
    }
    let enabled = !b.accesskit_node().is_disabled();
    if enabled {
        b.click();
    }
    enabled
}

#[test]
fn continue_runs_the_program_to_completion_and_the_toolbar_says_so() {
    let mut h = harness("farm", &["--threads", "2", "--tasks", "50"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    assert!(h.query_by_label_contains("attached to farm").is_some());
    assert!(
        continue_button(&h, 0),
        "Continue is enabled while something is held"
    );
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    pump(&mut h, "the toolbar", |_| true);
    assert!(
        h.query_by_label("program exited with code 0").is_some(),
        "toolbar shows the exit code"
    );
    pump(&mut h, "the last output", |a| !last_output(a).is_null());
    assert_eq!(last_output(h.state())["matches_reference"], true);
    assert_eq!(
        h.state().model.nodes().len(),
        1 + 2 + 1,
        "Split, Work on two threads, Sum"
    );
}

#[test]
fn breakpoint_box_holds_the_node_and_its_continue_resumes() {
    let mut h = harness("farm", &["--threads", "2", "--tasks", "6"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    h.get_by_role_and_label(Role::CheckBox, "Work @ proc[1]").click();
    pump(&mut h, "the breakpoint", |a| {
        let key = a.model.node_key("Work", "proc[1]");
        key.is_some_and(|k| a.model.control.breakpoints.contains_key(&k))
    });
    assert!(continue_button(&h, 0));
    let key = h.state().model.node_key("Work", "proc[1]").unwrap();
    let mut hits = 0;
    // Rows: Split@main[0], Work@proc[0], Work@proc[1], Sum@main[0]; toolbar first.
    let row = 1 + h
        .state()
        .model
        .breakpoint_slots()
        .iter()
        .position(|k| *k == key)
        .unwrap();
    loop {
        pump(&mut h, "a hit or the end", |a| {
            a.model.control.exited.is_some()
                || a.model
                    .node(key)
                    .is_some_and(|n| n.status == NodeStatus::HeldStart)
        });
        if h.state().model.control.exited.is_some() {
            break;
        }
        hits += 1;
        // Every held start is Work on proc[1]; the node shows it, its Continue is enabled.
        for e in h.state().model.control.held.values().map(|h| &h.event) {
            assert!(
                matches!(e, Event::Start(s) if s.op == "Work" && s.thread == "proc[1]"),
                "{e:?}"
            );
        }
        let held_id = h.state().model.held_of_named("proc[1]").unwrap().0;
        assert!(
            continue_button(&h, row),
            "the breakpoint's Continue is enabled when hit"
        );
        pump(&mut h, "the release", |a| {
            !a.model.control.held.contains_key(&held_id)
        });
    }
    assert_eq!(hits, 3, "tasks 1, 3, 5 run on proc[1]");
    pump(&mut h, "the last output", |a| !last_output(a).is_null());
    assert_eq!(last_output(h.state())["matches_reference"], true);
}

#[test]
fn a_conditional_breakpoint_from_the_form_holds_from_its_hit_and_is_removed() {
    let mut h = harness("farm", &["--threads", "2", "--tasks", "6"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    h.get_by_label("Add a conditional breakpoint").click();
    h.step();
    for (field, text) in [("operation", "Work"), ("thread", "proc[1]"), ("hit", "2")] {
        h.get_by_role_and_label(Role::TextInput, field).focus();
        h.step();
        h.get_by_role_and_label(Role::TextInput, field).type_text(text);
        h.step();
    }
    h.get_by_label("Add breakpoint").click();
    pump(&mut h, "the breakpoint listed", |a| {
        a.model.control.conditional.len() == 1
    });
    h.step();
    assert!(h.query_by_label("Work @ proc[1] · from hit 2").is_some());
    assert!(continue_button(&h, 0));
    pump(&mut h, "the hit", |a| {
        a.model.control.exited.is_some() || a.model.held_of_named("proc[1]").is_some()
    });
    let held: Vec<_> = h
        .state()
        .model
        .control
        .held
        .values()
        .map(|h| h.event.clone())
        .collect();
    let [Event::Start(s)] = &held[..] else {
        panic!("one held start: {held:?}")
    };
    // Tasks 1, 3 and 5 run on proc[1]: its 2nd Work start is task 3's.
    assert_eq!(
        (s.op.as_str(), s.thread.as_str(), s.msg.as_str()),
        ("Work", "proc[1]", "0.3")
    );
    h.get_by_label("Remove").click();
    pump(&mut h, "the breakpoint removed", |a| {
        a.model.control.conditional.is_empty()
    });
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    pump(&mut h, "the last output", |a| !last_output(a).is_null());
    assert_eq!(last_output(h.state())["matches_reference"], true);
    let starts = h
        .state()
        .model
        .node_named("Work", "proc[1]")
        .map(|n| n.processed.len());
    assert_eq!(starts, Some(3), "task 5 ran without a hold");
}

#[test]
fn reorder_with_the_buttons_is_applied_by_the_agent() {
    let mut h = harness("farm", &["--threads", "2", "--tasks", "10"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    h.get_by_role_and_label(Role::CheckBox, "Work @ proc[0]").click();
    pump(&mut h, "the breakpoint", |a| {
        !a.model.control.breakpoints.is_empty()
    });
    assert!(continue_button(&h, 0));
    pump(&mut h, "the hit and a full queue", |a| {
        a.model
            .node_named("Work", "proc[0]")
            .is_some_and(|n| n.status == NodeStatus::HeldStart)
            && a.model.queue_named("proc[0]").is_some_and(|q| q.len() == 4)
    });
    let key = node_id(h.state(), "Work", "proc[0]");
    h.state_mut().select_node(key);
    h.step();
    // Rows: 0.0 (about to start), 0.2, 0.4, 0.6, 0.8. Move the first one down.
    let down = h.get_all_by_role_and_label(Role::Button, "Down").next().unwrap();
    down.scroll_to_me();
    down.click();
    h.step();
    if std::env::var("GUI_DEBUG").is_ok() {
        eprintln!("order after Down: {:?}", h.state().ui.order);
        for b in h.get_all_by_role_and_label(Role::Button, "Down") {
            eprintln!(
                "down {:?} disabled={}",
                b.rect(),
                b.accesskit_node().is_disabled()
            );
        }
        let a = h.get_by_label("Apply order");
        eprintln!(
            "apply {:?} disabled={}",
            a.rect(),
            a.accesskit_node().is_disabled()
        );
    }
    h.get_by_label("Apply order").click();
    pump(&mut h, "the new head to start", |a| {
        processed(a, "Work", "proc[0]").len() >= 2
    });
    assert_eq!(
        processed(h.state(), "Work", "proc[0]")[..2],
        ["0.0", "0.2"],
        "0.2 starts after the put-back"
    );
    let q: Vec<String> = h
        .state()
        .model
        .queue_named("proc[0]")
        .unwrap()
        .iter()
        .map(|m| m.id.to_string())
        .collect();
    assert_eq!(
        q,
        ["0.0", "0.4", "0.6", "0.8"],
        "the agent's queue follows the new order"
    );
    h.get_by_role_and_label(Role::CheckBox, "Work @ proc[0]").click();
    pump(&mut h, "the breakpoint cleared", |a| {
        a.model.control.breakpoints.is_empty()
    });
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    let order = processed(h.state(), "Work", "proc[0]");
    assert_eq!(order, ["0.0", "0.2", "0.0", "0.4", "0.6", "0.8"]);
}

#[test]
fn editing_a_held_message_changes_what_the_program_does() {
    let mut h = harness("mergesort", &["--threads", "4", "--size", "8", "--chunks", "4"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    h.get_by_label("pause main[0]").click();
    pump(&mut h, "the pause", |a| {
        let main = a.model.thread_key("main[0]");
        main.is_some_and(|t| a.model.control.paused.contains(&t))
    });
    assert!(continue_button(&h, 0));
    pump(&mut h, "the held send", |a| {
        a.model
            .control
            .held
            .values()
            .any(|h| matches!(h.event, Event::Send(_)))
    });
    let content = h
        .state()
        .model
        .control
        .held
        .values()
        .find_map(|h| match &h.event {
            Event::Send(s) => s.content.clone(),
            _ => None,
        })
        .unwrap();
    assert_eq!(content["target"], 0);
    let split = node_id(h.state(), "Split", "main[0]");
    h.state_mut().select_node(split);
    h.step();
    let mut edited = content.clone();
    edited["target"] = serde_json::json!(3);
    let editor = h.get_by_role(Role::MultilineTextInput);
    editor.focus();
    h.step();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.step();
    h.get_by_role(Role::MultilineTextInput)
        .type_text(&edited.to_string());
    h.step();
    h.get_by_label("Apply edit").click();
    pump(&mut h, "the edit to be applied", |a| {
        a.ui.edit.is_some() && a.ui.action_error.is_none()
    });
    h.step();
    h.get_by_label("pause main[0]").click();
    pump(&mut h, "the pause cleared", |a| a.model.control.paused.is_empty());
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    let sorted_on_3 = processed(h.state(), "Sort", "proc[3]");
    assert!(
        sorted_on_3.iter().any(|m| m == "0.0"),
        "the edited target sent chunk 0.0 to proc[3]: {sorted_on_3:?}"
    );
    pump(&mut h, "the last output", |a| !last_output(a).is_null());
    assert_eq!(last_output(h.state())["matches_reference"], true);
}

#[test]
fn provoking_the_heat_race_through_the_widgets_shows_the_mismatch() {
    let mut h = harness("heat", &["--threads", "4"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    h.get_by_role_and_label(Role::CheckBox, "BorderReq @ proc[1]")
        .click();
    pump(&mut h, "the breakpoint", |a| {
        !a.model.control.breakpoints.is_empty()
    });
    assert!(continue_button(&h, 0));
    pump(
        &mut h,
        "proc[1] held with both neighbours' requests queued",
        |a| {
            a.model
                .node_named("BorderReq", "proc[1]")
                .is_some_and(|n| n.status == NodeStatus::HeldStart)
                // Both requests arrived: pending, or (on a loaded machine) already served
                // before the split, which is the same order.
                && a.model.queue_named("proc[1]").map_or(0, |q| q.iter().filter(|m| m.op == "SendBorder").count())
                    + processed(a, "SendBorder", "proc[1]").len()
                    == 2
        },
    );
    let key = node_id(h.state(), "BorderReq", "proc[1]");
    h.state_mut().select_node(key);
    h.step();
    // Rows: the split's input (about to start), then the pending requests: move it last.
    let pending = h
        .state()
        .model
        .queue_named("proc[1]")
        .unwrap()
        .iter()
        .filter(|m| m.op == "SendBorder")
        .count();
    for row in 0..pending {
        let down = h
            .get_all_by_role_and_label(Role::Button, "Down")
            .nth(row)
            .unwrap();
        down.scroll_to_me();
        down.click();
        h.step();
    }
    let order = h.state().ui.order.clone().unwrap().1;
    assert_eq!(order.last().map(String::as_str), Some("1.1"), "{order:?}");
    if pending > 0 {
        h.get_by_label("Apply order").click();
    }
    // proc[1] answers its neighbours first; they update while it is held at its split again.
    pump(&mut h, "both neighbours updated, proc[1] held again", |a| {
        let updated = |t: &str| {
            a.model
                .node_named("Update", t)
                .is_some_and(|n| n.steps >= 1 && n.status != NodeStatus::Running)
        };
        updated("proc[0]")
            && updated("proc[2]")
            && a.model.node_named("BorderReq", "proc[1]").unwrap().status == NodeStatus::HeldStart
    });
    // The race is provoked: save the session as a scenario from the Session menu.
    let scenario = std::env::temp_dir().join(format!("racetrack-gui-{}.rtrec", std::process::id()));
    let _ = std::fs::remove_file(&scenario);
    save_from_session_menu(&mut h, &scenario);
    assert_eq!(h.state().ui.scenario_path, scenario.display().to_string());
    pump(&mut h, "the scenario saved", |a| {
        a.model
            .control
            .session_note
            .as_deref()
            .is_some_and(|n| n.starts_with("scenario saved"))
    });
    h.step();
    assert!(
        h.query_by_label_contains("scenario saved: ").is_some(),
        "the toolbar says so"
    );
    h.get_by_role_and_label(Role::CheckBox, "BorderReq @ proc[1]")
        .click();
    pump(&mut h, "the breakpoint cleared", |a| {
        a.model.control.breakpoints.is_empty()
    });
    assert!(continue_button(&h, 0));
    pump(&mut h, "the program's report", |a| a.result_matches().is_some());
    h.step();
    assert!(
        h.query_by_label("result: differs from reference").is_some(),
        "the GUI reports the mismatch"
    );
    assert_eq!(h.state().result_matches(), Some(false));

    // Replayed without the GUI, the saved session shows the race again.
    assert_eq!(
        heat_replayed(&scenario)["matches_reference"],
        false,
        "the scenario replays the race"
    );

    // After the program exited, the Session menu saves the session as it ended.
    pump(&mut h, "the connection closed", |a| {
        a.model.control.exited.is_some() && !a.model.control.attached
    });
    let after = std::env::temp_dir().join(format!("racetrack-gui-after-{}.rtrec", std::process::id()));
    let _ = std::fs::remove_file(&after);
    save_from_session_menu(&mut h, &after);
    pump(&mut h, "the session saved after the exit", |a| {
        a.model
            .control
            .session_note
            .as_deref()
            .is_some_and(|n| n.ends_with("(the session as the program ended)"))
    });
    assert_eq!(
        heat_replayed(&after)["matches_reference"],
        false,
        "the session as it ended replays the race"
    );
}

/// Type `path` into the Session menu's file field and press Save scenario.
fn save_from_session_menu(h: &mut Harness<'static, App>, path: &std::path::Path) {
    let label = "File (on this machine)";
    h.get_by_label("Session").click();
    h.step();
    h.get_by_label(label).focus();
    h.step();
    h.key_press_modifiers(egui::Modifiers::COMMAND, egui::Key::A);
    h.step();
    h.get_by_label(label).type_text(&path.display().to_string());
    h.step();
    h.get_by_label("Save scenario").click();
}

/// `heat --threads 4` replaying `scenario` without the GUI: its report.
fn heat_replayed(scenario: &std::path::Path) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_racetrack"))
        .arg("replay")
        .arg(scenario)
        .arg("--")
        .arg(support::example_bin("heat"))
        .args(["--threads", "4"])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_str(String::from_utf8_lossy(&out.stdout).lines().last().unwrap()).unwrap()
}

#[test]
fn an_operation_panic_shows_in_the_event_log() {
    let mut h = harness("farm", &["--threads", "2", "--tasks", "10", "--panic-at", "3"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    h.step();
    assert!(h.query_by_label("program exited with code 1").is_some());
    // The log line names the operation, thread, message and the panic text.
    let _ =
        h.get_by_label_contains("[panic] Work on proc[1] panicked at message 0.3: task 3 failed on purpose");
}

/// Past a thousand nodes the graph is painted directly: a click on a node selects it, a
/// drag pans, a scroll zooms around the pointer.
#[test]
fn a_large_graph_is_painted_directly_and_its_nodes_answer_clicks() {
    let mut h = harness("farm", &["--threads", "1100", "--tasks", "1100"]);
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit and every node", |a| {
        a.model.control.exited.is_some() && a.model.nodes().len() == 1102
    });
    h.step();
    assert!(
        h.query_by_label_contains("unfolded graph, 1102 nodes (drawn directly)")
            .is_some(),
        "the canvas is drawn and labelled"
    );
    let key = node_id(h.state(), "Work", "proc[550]");
    let at = h.state().node_screen_pos(key).expect("drawn");
    let click = |h: &mut Harness<'static, App>, pos: egui::Pos2| {
        h.hover_at(pos);
        for pressed in [true, false] {
            h.event(egui::Event::PointerButton {
                pos,
                button: egui::PointerButton::Primary,
                pressed,
                modifiers: egui::Modifiers::default(),
            });
        }
        h.step();
        h.step();
    };
    click(&mut h, at);
    assert_eq!(h.state().ui.selected.as_ref(), Some(&key));
    assert!(h.query_by_label("Work @ proc[550]").is_some(), "the node's tabs");

    // Drag (Fit is on): Fit turns off and the node moves with the pointer.
    assert!(h.state().ui.fit);
    let before = h.state().node_screen_pos(key).unwrap();
    h.drag_at(before);
    h.step();
    h.hover_at(before + egui::vec2(40.0, 30.0));
    h.step();
    h.drop_at(before + egui::vec2(40.0, 30.0));
    h.step();
    h.step();
    let after = h.state().node_screen_pos(key).unwrap();
    assert!(!h.state().ui.fit, "a drag turns Fit off");
    assert!(
        (after - before - egui::vec2(40.0, 30.0)).length() < 1.0,
        "{before:?} -> {after:?}"
    );

    // Zoom in around the node: it stays under the pointer, its neighbours move apart.
    let next = node_id(h.state(), "Work", "proc[551]");
    let gap = |h: &Harness<'static, App>| {
        (h.state().node_screen_pos(next).unwrap() - h.state().node_screen_pos(key).unwrap()).length()
    };
    let gap_before = gap(&h);
    h.hover_at(after);
    h.event(egui::Event::MouseWheel {
        unit: egui::MouseWheelUnit::Point,
        delta: egui::vec2(0.0, 200.0),
        modifiers: egui::Modifiers::default(),
        phase: egui::TouchPhase::Move,
    });
    for _ in 0..30 {
        h.step();
    }
    let zoomed = h.state().node_screen_pos(key).unwrap();
    assert!((zoomed - after).length() < 1.0, "{after:?} -> {zoomed:?}");
    assert!(gap(&h) > 1.5 * gap_before, "{gap_before} -> {}", gap(&h));

    // Too dense for labels so far; zoomed in until they fit, the nodes in view are labelled.
    assert_eq!(h.state().canvas_labelled(), 0);
    for _ in 0..4 {
        h.event(egui::Event::MouseWheel {
            unit: egui::MouseWheelUnit::Point,
            delta: egui::vec2(0.0, 250.0),
            modifiers: egui::Modifiers::default(),
            phase: egui::TouchPhase::Move,
        });
        for _ in 0..30 {
            h.step();
        }
    }
    let labelled = h.state().canvas_labelled();
    eprintln!("canvas zoomed in: {labelled} nodes labelled");
    assert!((2..=400).contains(&labelled), "{labelled}");
}

/// Node labels keep a readable screen size: heat (four slices) in a 1280×800 window, after
/// "Fit" and after zooming out and in, every node is a box with its label at ≥ 11 points,
/// inside the view, not overlapping its neighbours; a click on a label selects its node.
#[test]
fn node_labels_stay_readable_after_fit_and_at_other_zooms() {
    let prog = support::example_bin("heat").display().to_string();
    let session = Session::launch(&prog, &[], Waker::default()).expect("launch");
    let mut h = Harness::builder()
        .with_size((1280.0, 800.0))
        .build_ui_state(|ui, app: &mut App| app.frame_ui(ui), App::new(session, None));
    pump(&mut h, "the start hold", |a| !a.model.control.held.is_empty());
    assert!(continue_button(&h, 0));
    pump(&mut h, "exit", |a| a.model.control.exited.is_some());
    // Scatter, Loaded, Split, Merge on main[0]; Load, BorderReq, SendBorder, Collect,
    // Update on each of the four slices.
    assert_eq!(h.state().model.nodes().len(), 4 + 5 * 4);
    h.run_steps(4);
    assert!(h.state().ui.fit, "Fit is the default view");

    /// Every node's drawing: (label font size, label text height, whether elided).
    fn check(h: &Harness<'static, App>, when: &str) -> (f32, f32, usize) {
        let app = h.state();
        let view = app.graph_rect().expect("the graph is drawn");
        let drawn = app.drawn_nodes();
        assert_eq!(
            drawn.len(),
            app.model.nodes().len(),
            "{when}: every node is drawn"
        );
        let (mut font, mut height, mut elided) = (f32::MAX, f32::MAX, 0);
        for (id, d) in &drawn {
            let key = app.model.node_names(app.model.nodes()[id.index()].key);
            assert!(d.boxed, "{when}: {key:?} is a labelled box: {d:?}");
            let label = d.label.as_ref().expect("labelled");
            assert!(label.font_pt >= 11.0, "{when}: {key:?} {label:?}");
            assert!(label.size.y >= 11.0, "{when}: {key:?} {label:?}");
            assert!(d.rect.height() > label.size.y, "{when}: the box holds its text");
            let full = format!("{} @ {}", key.0, key.1);
            if label.text != full {
                assert!(
                    label.text.ends_with('…') && full.starts_with(label.text.trim_end_matches('…')),
                    "{when}: {key:?} shows {:?}",
                    label.text
                );
                elided += 1;
            }
            font = font.min(label.font_pt);
            height = height.min(label.size.y);
        }
        // Nodes in the view (after Fit: all of them) overlap neither the view's edge nor
        // each other.
        let visible: Vec<_> = drawn.iter().filter(|(_, d)| view.intersects(d.rect)).collect();
        if std::env::var("GUI_DEBUG").is_ok() {
            for (k, d) in &drawn {
                eprintln!("{when}: {k:?} {d:?}");
            }
        }
        for (i, (ka, a)) in visible.iter().enumerate() {
            if when == "fit" {
                assert!(
                    view.contains_rect(a.rect),
                    "{when}: {ka:?} {:?} in {view:?}",
                    a.rect
                );
            }
            for (kb, b) in &visible[i + 1..] {
                assert!(
                    !a.rect.intersects(b.rect),
                    "{when}: {ka:?} {:?} overlaps {kb:?} {:?}",
                    a.rect,
                    b.rect
                );
            }
        }
        let centre = |t: &str| {
            drawn
                .iter()
                .find(|(k, _)| app.model.node_names(app.model.nodes()[k.index()].key) == ("Load", t))
                .map(|(_, d)| d.rect.center())
                .unwrap()
        };
        eprintln!(
            "{when}: label font {font} pt, text height {height} px, {elided} of {} elided, \
             {} in view, columns {:.1} px apart",
            drawn.len(),
            visible.len(),
            centre("proc[1]").x - centre("proc[0]").x
        );
        (font, height, elided)
    }
    let (_, _, elided) = check(&h, "fit");
    assert_eq!(elided, 0, "after Fit every label is whole");

    // A click on a label selects its node.
    let key = node_id(h.state(), "BorderReq", "proc[2]");
    let box_of = |h: &Harness<'static, App>, key: &NodeId| {
        h.state()
            .drawn_nodes()
            .into_iter()
            .find(|(k, _)| k == key)
            .map(|(_, d)| d.rect)
            .unwrap()
    };
    let rect = box_of(&h, &key);
    let at = egui::pos2(rect.right() - 8.0, rect.center().y);
    h.hover_at(at);
    h.step();
    for pressed in [true, false] {
        h.event(egui::Event::PointerButton {
            pos: at,
            button: egui::PointerButton::Primary,
            pressed,
            modifiers: egui::Modifiers::default(),
        });
    }
    h.run_steps(3);
    assert_eq!(
        h.state().ui.selected.as_ref(),
        Some(&key),
        "clicked at {at:?} in {rect:?}"
    );

    // Zoom (each zoom event is a 10% step of egui_graphs) around the middle of the view.
    let zoom = |h: &mut Harness<'static, App>, factor: f32, steps: usize| {
        let at = h.state().graph_rect().unwrap().center();
        h.hover_at(at);
        for _ in 0..steps {
            h.event(egui::Event::Zoom(factor));
            h.step();
        }
        h.run_steps(3);
    };
    let before = box_of(&h, &key);
    zoom(&mut h, 0.5, 2);
    assert!(!h.state().ui.fit, "zooming turns Fit off");
    let gap_out = (box_of(&h, &key).center() - before.center()).length();
    check(&h, "zoomed out 2 steps");
    zoom(&mut h, 2.0, 6);
    check(&h, "zoomed in 6 steps");
    let after = box_of(&h, &key);
    assert!(
        (after.size() - before.size()).length() < 1.0,
        "the box keeps its screen size: {before:?} -> {after:?} ({gap_out})"
    );
}

/// `racetrack open`'s view: a real `heat` run's trace file, shown without the program.
/// Start empties the view, Event ▶ adds one event at a time, a click in the middle of the
/// time slider shows the program half-way through, End shows all of it again.
#[test]
fn a_trace_opens_without_its_program_and_the_time_slider_moves_through_it() {
    use racetrack_protocol::trace::TraceReader;
    let dir = std::env::temp_dir().join(format!("racetrack-gui-trace-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("heat.rtrace");
    let out = std::process::Command::new(support::example_bin("heat"))
        .args(["--threads", "2", "--iters", "20"])
        .env("RACETRACK_TRACE", &path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let events = TraceReader::open(&path)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    let n = events.len();
    let steps = |app: &App| app.model.nodes().iter().map(|node| node.steps).sum::<u64>();
    let all_steps = events
        .iter()
        .filter(|e| matches!(e.event, Event::Start(_)))
        .count() as u64;
    // A script's `seek` moves the slider too (the GUIDE's screenshot uses one).
    let end_ms = events.last().unwrap().time_ns as f64 / 1e6;
    let script = format!("{{\"cmd\":\"seek\",\"ms\":{}}}", end_ms / 4.0);
    let script = racetrack::gui::script::Script::parse(&script).unwrap();
    let mut s = Harness::builder().with_size((1400.0, 1000.0)).build_ui_state(
        |ui, app: &mut App| app.frame_ui(ui),
        App::post_mortem("heat.rtrace".into(), events.clone()).with_script(Some(script)),
    );
    s.run_steps(2);
    let t = s.state().timeline.as_ref().unwrap();
    assert!(
        t.time_ns() as f64 <= end_ms * 1e6 / 4.0 && t.at() > 0,
        "seek: {} events",
        t.at()
    );
    assert!(
        events[t.at()].time_ns as f64 > end_ms * 1e6 / 4.0,
        "no event after the time"
    );
    let mut h = Harness::builder().with_size((1400.0, 1000.0)).build_ui_state(
        |ui, app: &mut App| app.frame_ui(ui),
        App::post_mortem("heat.rtrace".into(), events),
    );
    h.run_steps(2);
    assert!(h.query_by_label_contains("trace of heat").is_some());
    assert!(h.query_by_label(&format!("event {n} of {n}")).is_some());
    assert_eq!(steps(h.state()), all_steps, "every step of the run");
    let updates = processed(h.state(), "Update", "proc[0]");
    assert!(!updates.is_empty(), "proc[0] updated");

    h.get_by_label("Start").click();
    h.run_steps(2);
    assert_eq!(h.state().timeline.as_ref().unwrap().at(), 0);
    assert!(h.state().model.nodes().is_empty(), "nothing has happened yet");
    for _ in 0..3 {
        h.get_by_label("Event ▶").click();
        h.run_steps(2);
    }
    assert!(h.query_by_label(&format!("event 3 of {n}")).is_some());

    h.get_by_role(Role::Slider).click();
    h.run_steps(2);
    let t = h.state().timeline.as_ref().unwrap();
    let (at, half) = (t.at(), t.end_ns() / 2);
    assert!(0 < at && at < n, "half-way: {at} of {n} events");
    let mid = steps(h.state());
    assert!(0 < mid && mid < all_steps, "half-way: {mid} of {all_steps} steps");
    // The view is the program at the slider's time: its events up to there, no more.
    let shown_ns = t.time_ns();
    assert!(
        shown_ns.abs_diff(half) < t.end_ns() / 10,
        "{shown_ns} ns, half is {half}"
    );

    h.get_by_label("End").click();
    h.run_steps(2);
    assert_eq!(steps(h.state()), all_steps);
    assert_eq!(processed(h.state(), "Update", "proc[0]"), updates);
}
